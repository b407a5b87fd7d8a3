/* MOEX_EMULATE_AVX512 and MOEX_EMULATE_AMX builds only (see CMakeLists.txt):
 * stands in for <immintrin.h> in the *_avx512.c files (and in the *_amx.c
 * files, for their AVX-512), which are then compiled with AVX2, FMA and F16C
 * but without any -mavx512* flag. The compiler's own header gives the native
 * AVX2/FMA/F16C intrinsics; SIMDe, with its native aliases, turns every
 * AVX-512 (F/BW/VL/DQ/VNNI) intrinsic into portable code, so the kernels run,
 * and are tested, on CPUs without AVX-512. Never used by a normal build. */
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

#if !defined(_mm512_cvtepi32_ps)
/* Missing from SIMDe 0.7.4 (Debian 12): int32 to float lane by lane, which
 * rounds as VCVTDQ2PS does under the default MXCSR (to nearest even). */
static inline simde__m512 moex_emu_mm512_cvtepi32_ps(simde__m512i a) {
    simde__m512i_private a_ = simde__m512i_to_private(a);
    simde__m512_private r_;
    for (size_t i = 0; i < sizeof r_.f32 / sizeof r_.f32[0]; i++) r_.f32[i] = (simde_float32)a_.i32[i];
    return simde__m512_from_private(r_);
}
#define _mm512_cvtepi32_ps(a) moex_emu_mm512_cvtepi32_ps(a)
#endif

#if !defined(_mm512_cvtps_pd)
/* Also missing there: float to double (exact) and double to float (to
 * nearest even, as VCVTPD2PS under the default MXCSR), lane by lane. */
static inline simde__m512d moex_emu_mm512_cvtps_pd(simde__m256 a) {
    simde__m256_private a_ = simde__m256_to_private(a);
    simde__m512d_private r_;
    for (size_t i = 0; i < sizeof r_.f64 / sizeof r_.f64[0]; i++) r_.f64[i] = (simde_float64)a_.f32[i];
    return simde__m512d_from_private(r_);
}
static inline simde__m256 moex_emu_mm512_cvtpd_ps(simde__m512d a) {
    simde__m512d_private a_ = simde__m512d_to_private(a);
    simde__m256_private r_;
    for (size_t i = 0; i < sizeof a_.f64 / sizeof a_.f64[0]; i++) r_.f32[i] = (simde_float32)a_.f64[i];
    return simde__m256_from_private(r_);
}
#define _mm512_cvtps_pd(a) moex_emu_mm512_cvtps_pd(a)
#define _mm512_cvtpd_ps(a) moex_emu_mm512_cvtpd_ps(a)
#endif

#endif
