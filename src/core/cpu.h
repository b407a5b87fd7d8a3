/* What the CPU we run on can do, detected once at run time. */
#ifndef MOEX_CPU_H
#define MOEX_CPU_H

#include <stdbool.h>

struct cpu_features {
    bool avx2, fma, f16c;                 /* x86 AVX2 level */
    bool avx512f, avx512bw, avx512vl, avx512vnni;
    bool avxvnni;                         /* vpdpbusd on ymm without AVX-512 */
    bool amx_tile, amx_int8;
    bool neon, dotprod;                   /* aarch64 */
};

const struct cpu_features *cpu_features(void);
/* Physical cores (not hyper-threads) available to this process; >= 1. */
int cpu_physical_cores(void);
/* One line such as "AVX2 FMA F16C AVX512-VNNI". */
const char *cpu_features_string(void);

#endif
