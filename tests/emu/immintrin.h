/* MOEX_EMULATE_AVX512 builds only (see CMakeLists.txt): stands in for
 * <immintrin.h> in the *_avx512.c files, which are then compiled with AVX2,
 * FMA and F16C but without any -mavx512* flag. The compiler's own header
 * gives the native AVX2/FMA/F16C intrinsics; SIMDe, with its native aliases,
 * turns every AVX-512 (F/BW/VL/DQ/VNNI) intrinsic into portable code, so the
 * kernels run, and are tested, on CPUs without AVX-512. Never used by a
 * normal build. */
#ifndef MOEX_EMU_IMMINTRIN_H
#define MOEX_EMU_IMMINTRIN_H
/* SIMDe is third-party code: its warnings are not ours. */
#pragma GCC system_header

#include_next <immintrin.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx2.h>
#include <simde/x86/fma.h>
#include <simde/x86/f16c.h>
#include <simde/x86/avx512.h>

#endif
