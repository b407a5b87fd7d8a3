/* Can this process run AMX-INT8? Plain C (no ISA flags), so that the answer
 * is safe to ask on any x86-64 CPU before a line of dev_amx.c runs. */
#include "dev/dev_impl.h"

#if defined(__x86_64__)

#include "core/cpu.h"
#include "core/error.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux asks a process to request the 8 KiB tile state before its first
 * tile instruction (Linux 5.16+, arch/x86/include/uapi/asm/prctl.h). The
 * permission is the process's: it covers every thread, those already
 * running included, and asking again once granted just succeeds. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int amx_request(void) {
#if defined(MOEX_EMULATED_AMX)
    /* Emulation builds only (cmake -DMOEX_EMULATE_AMX=ON): the tile
     * instructions are plain C and the AVX-512 goes through SIMDe, so
     * neither the CPU nor the kernel's tile permission is needed. */
    return DEV_OK;
#else
    const struct cpu_features *f = cpu_features();
    if (!f->amx_tile || !f->amx_int8) {
        moex_errorf("amx: this CPU has no AMX-INT8 (CPUID 7.0 EDX bits 24/25 with the OS tile state; it has: %s)",
                    cpu_features_string());
        return DEV_E_UNAVAILABLE;
    }
    /* The epilogue and the compiler's code in dev_amx.c may use AVX-512;
     * every AMX CPU so far has it, but ask rather than assume. */
    if (!f->avx512f || !f->avx512bw || !f->avx512vl) {
        moex_errorf("amx: AMX without AVX-512 F/BW/VL is not supported");
        return DEV_E_UNAVAILABLE;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        moex_errorf("amx: the kernel refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s; Linux 5.16+ needed)",
                    strerror(errno));
        return DEV_E_UNAVAILABLE;
    }
    return DEV_OK;
#endif
}

#endif
