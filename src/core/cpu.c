#include "core/cpu.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
static unsigned long long read_xcr0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

static struct cpu_features features;
static int features_ready;

static void detect(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    bool ymm_os = (xcr0 & 6) == 6;
    bool zmm_os = (xcr0 & 0xe6) == 0xe6;
    bool tile_os = (xcr0 & (3ull << 17)) == (3ull << 17);
    features.fma = ymm_os && ((c >> 12) & 1);
    features.f16c = ymm_os && ((c >> 29) & 1);
    __cpuid_count(7, 0, a, b, c, d);
    features.avx2 = ymm_os && ((b >> 5) & 1);
    features.avx512f = zmm_os && ((b >> 16) & 1);
    features.avx512bw = zmm_os && ((b >> 30) & 1);
    features.avx512vl = zmm_os && ((b >> 31) & 1);
    features.avx512vnni = zmm_os && ((c >> 11) & 1);
    features.amx_tile = tile_os && ((d >> 24) & 1);
    features.amx_int8 = tile_os && ((d >> 25) & 1);
    __cpuid_count(7, 1, a, b, c, d);
    features.avxvnni = ymm_os && ((a >> 4) & 1);
#if defined(MOEX_EMULATED_AVX512)
    /* Emulation builds only (cmake -DMOEX_EMULATE_AVX512=ON): the AVX-512
     * kernels were compiled to portable code with SIMDe and run on any CPU
     * with AVX2, so say AVX-512 is here to have them dispatched and tested. */
    features.avx512f = features.avx512bw = features.avx512vl = features.avx512vnni = true;
#endif
#if defined(MOEX_EMULATED_AMX)
    /* Emulation builds only (cmake -DMOEX_EMULATE_AMX=ON): dev_amx.c runs
     * its tile instructions as plain C (tests/emu/amx_emu.c), so say AMX is
     * here to have the amx device opened and tested. */
    features.amx_tile = features.amx_int8 = true;
#endif
#elif defined(__aarch64__)
    features.neon = true;
#if defined(__linux__)
    features.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
#endif
}

const struct cpu_features *cpu_features(void) {
    if (!__atomic_load_n(&features_ready, __ATOMIC_ACQUIRE)) {
        detect();
        __atomic_store_n(&features_ready, 1, __ATOMIC_RELEASE);
    }
    return &features;
}

const char *cpu_features_string(void) {
    static char s[160];
    const struct cpu_features *f = cpu_features();
    s[0] = 0;
    if (f->avx2) strcat(s, "AVX2 ");
    if (f->fma) strcat(s, "FMA ");
    if (f->f16c) strcat(s, "F16C ");
    if (f->avx512f && f->avx512bw && f->avx512vl) strcat(s, "AVX512 ");
    if (f->avx512vnni) strcat(s, "AVX512-VNNI ");
    if (f->avxvnni) strcat(s, "AVX-VNNI ");
    if (f->amx_int8) strcat(s, "AMX-INT8 ");
    if (f->neon) strcat(s, "NEON ");
    if (f->dotprod) strcat(s, "DOTPROD ");
    size_t n = strlen(s);
    if (n) s[n - 1] = 0; else strcpy(s, "(none)");
    return s;
}

int cpu_physical_cores(void) {
    cpu_set_t set;
    int logical = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) logical = CPU_COUNT(&set);
    else logical = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (logical < 1) logical = 1;
    /* Count distinct (package, core) pairs among the CPUs we may run on. */
    int cores = 0;
    int seen[1024][2];
    for (int cpu = 0; cpu < CPU_SETSIZE && cores < 1024; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char path[128];
        int pkg = -1, core = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        FILE *f = fopen(path, "r");
        if (f) { if (fscanf(f, "%d", &pkg) != 1) pkg = -1; fclose(f); }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        f = fopen(path, "r");
        if (f) { if (fscanf(f, "%d", &core) != 1) core = -1; fclose(f); }
        if (core < 0) return logical;
        int dup = 0;
        for (int i = 0; i < cores; i++) dup |= seen[i][0] == pkg && seen[i][1] == core;
        if (!dup) { seen[cores][0] = pkg; seen[cores][1] = core; cores++; }
    }
    return cores > 0 ? cores : logical;
}
