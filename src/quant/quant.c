/* The type table and the choice of kernels: each ISA file fills a table of
 * what it provides, and quant_init() merges them once, best ISA first, so
 * inner loops never test the ISA. */
#include "quant/quant_impl.h"

#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct type_row {
    const char *name;
    int block_size;
    size_t type_size;
    enum qtype vec_dot_type;
    from_float_fn from_float;
};

static void from_float_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void from_float_f16(const float *src, void *dst, int64_t n) { f32_to_fp16_row(src, dst, n); }
static void from_float_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}

static const struct type_row type_rows[QT_MAX] = {
    [QT_F32] = {"F32", 1, 4, QT_F32, from_float_f32},
    [QT_F16] = {"F16", 1, 2, QT_F16, from_float_f16},
    [QT_BF16] = {"BF16", 1, 2, QT_BF16, from_float_bf16},
    [QT_Q4_0] = {"Q4_0", QK4_0, sizeof(struct block_q4_0), QT_Q8_0, quantize_row_q4_0_ref},
    [QT_Q4_1] = {"Q4_1", QK4_1, sizeof(struct block_q4_1), QT_Q8_1, quantize_row_q4_1_ref},
    [QT_Q5_0] = {"Q5_0", QK5_0, sizeof(struct block_q5_0), QT_Q8_0, quantize_row_q5_0_ref},
    [QT_Q5_1] = {"Q5_1", QK5_1, sizeof(struct block_q5_1), QT_Q8_1, quantize_row_q5_1_ref},
    [QT_Q8_0] = {"Q8_0", QK8_0, sizeof(struct block_q8_0), QT_Q8_0, quantize_row_q8_0_ref},
    [QT_Q8_1] = {"Q8_1", QK8_1, sizeof(struct block_q8_1), QT_Q8_1, quantize_row_q8_1_ref},
    [QT_Q4_K] = {"Q4_K", QK_K, sizeof(struct block_q4_K), QT_Q8_K, quantize_row_q4_K_ref},
    [QT_Q5_K] = {"Q5_K", QK_K, sizeof(struct block_q5_K), QT_Q8_K, quantize_row_q5_K_ref},
    [QT_Q6_K] = {"Q6_K", QK_K, sizeof(struct block_q6_K), QT_Q8_K, quantize_row_q6_K_ref},
    [QT_Q8_K] = {"Q8_K", QK_K, sizeof(struct block_q8_K), QT_Q8_K, quantize_row_q8_K_ref},
};

/* GGUF type names of the ids moex does not compute with, for messages. */
static const char *const other_names[QT_MAX] = {
    [10] = "Q2_K", [11] = "Q3_K",
    [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL",
    [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [24] = "I8", [25] = "I16", [26] = "I32",
    [27] = "I64", [28] = "F64", [29] = "IQ1_M", [34] = "TQ1_0", [35] = "TQ2_0", [39] = "MXFP4",
};

static struct quant_isa_table isa_tables[ISA_COUNT];
static bool isa_filled[ISA_COUNT];
static struct qtype_traits traits[QT_MAX];
static struct qtype_kernels best[QT_MAX];
static fp16_to_f32_row_fn best_fp16_to_f32_row = fp16_to_f32_row_scalar;
static f32_to_fp16_row_fn best_f32_to_fp16_row = f32_to_fp16_row_scalar;
static silu_mul_row_fn best_silu_mul_row = silu_mul_row_scalar;
static enum isa active_isa = ISA_SCALAR;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int initialized;

const char *isa_name(enum isa isa) {
    switch (isa) {
    case ISA_SCALAR: return "scalar";
    case ISA_AVX2: return "avx2";
    case ISA_AVX512: return "avx512";
    case ISA_NEON: return "neon";
    default: return "?";
    }
}

bool isa_available(enum isa isa) {
    const struct cpu_features *f = cpu_features();
    switch (isa) {
    case ISA_SCALAR: return true;
#if defined(__x86_64__)
    case ISA_AVX2: return f->avx2 && f->fma && f->f16c;
    case ISA_AVX512:
        return f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
#endif
#if defined(__aarch64__)
    case ISA_NEON: return f->neon && f->dotprod;
#endif
    default: (void)f; return false;
    }
}

/* The ISA a member falls back to when an ISA's table leaves it NULL. */
static enum isa isa_parent(enum isa isa) {
    return isa == ISA_AVX512 ? ISA_AVX2 : ISA_SCALAR;
}

static void fill_tables(void) {
    quant_fill_scalar(&isa_tables[ISA_SCALAR]);
    isa_tables[ISA_SCALAR].gemm_r16[QT_Q4_K] = gemm_q4_K_r16_ref;
    isa_tables[ISA_SCALAR].gemm_r16[QT_Q6_K] = gemm_q6_K_r16_ref;
    isa_filled[ISA_SCALAR] = true;
#if defined(__x86_64__)
    /* The fill functions are compiled with their ISA's flags: never call one
     * on a CPU without it, even though today they are plain stores. */
    if (isa_available(ISA_AVX2)) {
        quant_fill_avx2(&isa_tables[ISA_AVX2]);
        isa_filled[ISA_AVX2] = true;
    }
    if (isa_available(ISA_AVX512)) {
        quant_fill_avx512(&isa_tables[ISA_AVX512]);
        isa_filled[ISA_AVX512] = true;
    }
#endif
#if defined(__aarch64__)
    if (isa_available(ISA_NEON)) {
        quant_fill_neon(&isa_tables[ISA_NEON]);
        isa_filled[ISA_NEON] = true;
    }
#endif
}

int isa_from_name(const char *name, enum isa *out) {
    for (int i = 0; i < ISA_COUNT; i++)
        if (name && strcmp(name, isa_name((enum isa)i)) == 0) { *out = (enum isa)i; return 0; }
    return -1;
}

#define PICK(member)                                                                      \
    do {                                                                                  \
        for (enum isa i = isa;; i = isa_parent(i)) {                                      \
            if (isa_tables[i].k[t].member) { best[t].member = isa_tables[i].k[t].member; break; } \
            if (i == ISA_SCALAR) { best[t].member = NULL; break; }                        \
        }                                                                                 \
    } while (0)

void quant_init(enum isa max_isa) {
    pthread_once(&tables_once, fill_tables);
    enum isa cap = max_isa;
    /* The best available ISA at or below the cap. NEON and x86 never coexist,
     * so "below" is the plain order of the enum. */
    enum isa isa = ISA_SCALAR;
    for (int i = ISA_COUNT - 1; i > ISA_SCALAR; i--)
        if (i <= (int)cap && isa_filled[i] && isa_available((enum isa)i)) { isa = (enum isa)i; break; }
    for (int t = 0; t < QT_MAX; t++) {
        PICK(vec_dot);
        PICK(gemm_tile);
        PICK(quantize_act);
        PICK(to_float);
        const struct type_row *r = &type_rows[t];
        traits[t] = (struct qtype_traits){0};
        if (!r->name) continue;
        traits[t].name = r->name;
        traits[t].block_size = r->block_size;
        traits[t].type_size = r->type_size;
        traits[t].from_float = r->from_float;
        traits[t].to_float = best[t].to_float;
        traits[t].vec_dot_type = r->vec_dot_type;
        traits[t].vec_dot = best[t].vec_dot;
        traits[t].gemm_tile = best[t].gemm_tile;
        /* only a SIMD kernel of the chosen ISA: the scalar one is for tests */
        traits[t].gemm_r16 = isa != ISA_SCALAR ? isa_tables[isa].gemm_r16[t] : NULL;
        /* AVX-VNNI is beyond the avx2 level: MOEX_ISA=avx2 leaves it out */
        if (isa == ISA_AVX2 && cap > ISA_AVX2 && cpu_features()->avxvnni && isa_tables[isa].gemm_r16_avxvnni[t])
            traits[t].gemm_r16 = isa_tables[isa].gemm_r16_avxvnni[t];
        traits[t].supported = best[t].vec_dot != NULL;
    }
    /* row kernels: the chosen ISA's, else its parents' */
#define PICK_ROW(member, best_fn, scalar_fn)                                  \
    best_fn = scalar_fn;                                                     \
    for (enum isa i = isa;; i = isa_parent(i)) {                             \
        if (isa_tables[i].member) { best_fn = isa_tables[i].member; break; } \
        if (i == ISA_SCALAR) break;                                          \
    }
    PICK_ROW(fp16_to_f32_row, best_fp16_to_f32_row, fp16_to_f32_row_scalar)
    PICK_ROW(f32_to_fp16_row, best_f32_to_fp16_row, f32_to_fp16_row_scalar)
    PICK_ROW(silu_mul_row, best_silu_mul_row, silu_mul_row_scalar)
#undef PICK_ROW
    active_isa = isa;
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

static void default_init(void) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) quant_init(ISA_COUNT);
}

static inline void ensure_init(void) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) pthread_once(&init_once, default_init);
}

const struct qtype_traits *quant_traits(enum qtype t) {
    ensure_init();
    if ((unsigned)t >= QT_MAX || !traits[t].name) return NULL;
    return &traits[t];
}

const struct qtype_kernels *quant_kernels(enum qtype t, enum isa isa) {
    pthread_once(&tables_once, fill_tables);
    if ((unsigned)t >= QT_MAX || (unsigned)isa >= ISA_COUNT) return NULL;
    if (!isa_filled[isa] || !isa_available(isa) || !type_rows[t].name) return NULL;
    return &isa_tables[isa].k[t];
}

gemm_tile_fn quant_r16_kernel(enum qtype t, enum isa isa) {
    return quant_kernels(t, isa) ? isa_tables[isa].gemm_r16[t] : NULL;
}

enum isa quant_active_isa(void) {
    ensure_init();
    return active_isa;
}

size_t quant_row_size(enum qtype t, int64_t n) {
    if ((unsigned)t >= QT_MAX || !type_rows[t].name || n < 0 || n % type_rows[t].block_size) return 0;
    return (size_t)(n / type_rows[t].block_size) * type_rows[t].type_size;
}

const char *quant_type_name(enum qtype t) {
    if ((unsigned)t >= QT_MAX) return "?";
    if (type_rows[t].name) return type_rows[t].name;
    return other_names[t] ? other_names[t] : "?";
}

void quant_quantize_act(enum qtype act_type, const float *src, void *dst, int64_t n) {
    ensure_init();
    if ((unsigned)act_type >= QT_MAX) return;
    if (best[act_type].quantize_act) best[act_type].quantize_act(src, dst, n);
    else if (type_rows[act_type].from_float) type_rows[act_type].from_float(src, dst, n);
}

void fp16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    ensure_init();
    best_fp16_to_f32_row(src, dst, n);
}

void f32_to_fp16_row(const float *src, uint16_t *dst, int64_t n) {
    ensure_init();
    best_f32_to_fp16_row(src, dst, n);
}

void silu_mul_row(float *g, const float *u, int64_t n) {
    ensure_init();
    best_silu_mul_row(g, u, n);
}
