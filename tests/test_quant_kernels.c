/* Every kernel of every ISA this machine can run against the scalar
 * reference: dot products and gemm tiles within 1e-5 of the sum of |products|,
 * activation quantization byte identical across ISAs, quantization error
 * bounds, fp16/bf16 conversions exhaustively. */
#include "harness.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* d * q + m rounds twice, as in ggml */
#endif


static const enum qtype weight_types[] = {QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                          QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

/* Random weight row: quantized from gaussian floats, or (kind 1) random bytes
 * with the fp16 scales replaced by sane values, to reach every bit pattern. */
static void make_weights(enum qtype t, int n, void *dst, int kind) {
    const struct qtype_traits *tr = quant_traits(t);
    float *x = malloc((size_t)n * sizeof(float));
    float sigma = 0.02f + test_uniform();
    for (int i = 0; i < n; i++) x[i] = sigma * test_gauss() + (kind == 2 ? 0.5f * sigma : 0.0f);
    tr->from_float(x, dst, n);
    free(x);
    if (kind != 1) return;
    size_t bytes = quant_row_size(t, n);
    uint8_t *p = dst;
    if (t == QT_F32 || t == QT_F16 || t == QT_BF16) return;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)test_rand();
    int nb = n / tr->block_size;
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = p + (size_t)b * tr->type_size;
        uint16_t d = f32_to_fp16(test_uniform() * 0.01f), dmin = f32_to_fp16(test_uniform() * 0.01f);
        if (t == QT_Q6_K) memcpy(blk + offsetof(struct block_q6_K, d), &d, 2);
        else memcpy(blk, &d, 2);
        if (t == QT_Q4_K || t == QT_Q5_K || t == QT_Q4_1 || t == QT_Q5_1) memcpy(blk + 2, &dmin, 2);
    }
}

static void make_acts(enum qtype act_type, int n, void *dst, int kind) {
    float *x = malloc((size_t)n * sizeof(float));
    float sigma = 0.1f + 3 * test_uniform();
    for (int i = 0; i < n; i++) x[i] = sigma * test_gauss();
    if (kind == 1) /* a block of zeros and some outliers */
        for (int i = 0; i < n && i < 300; i++) x[i] = i % 97 == 5 ? 40.0f : 0.0f;
    quant_kernels(act_type, ISA_SCALAR)->quantize_act(x, dst, n);
    free(x);
}

/* Sum of |w_i * a_i| from the dequantized rows: the scale of rounding error. */
static double abs_product_sum(enum qtype wt, enum qtype at, int n, const void *w, const void *a) {
    float *fw = malloc((size_t)n * sizeof(float)), *fa = malloc((size_t)n * sizeof(float));
    quant_kernels(wt, ISA_SCALAR)->to_float(w, fw, n);
    quant_kernels(at, ISA_SCALAR)->to_float(a, fa, n);
    double s = 0;
    for (int i = 0; i < n; i++) s += fabs((double)fw[i] * fa[i]);
    free(fw);
    free(fa);
    return s;
}

static bool close_enough(float got, float want, double scale) {
    return fabs((double)got - want) <= 1e-5 * scale + 1e-30;
}

/* Which ISAs' dot products and gemm tiles were compared with the reference. */
static bool isa_covered[ISA_COUNT];

static void test_dots(void) {
    static const int ns_k[] = {256, 768, 2048}, ns_32[] = {32, 96, 512, 2080}, ns_f[] = {1, 7, 33, 100, 1024};
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        enum qtype t = weight_types[ti];
        const struct qtype_traits *tr = quant_traits(t);
        enum qtype at = tr->vec_dot_type;
        const int *ns = tr->block_size == QK_K ? ns_k : tr->block_size == 32 ? ns_32 : ns_f;
        int n_ns = tr->block_size == QK_K ? 3 : tr->block_size == 32 ? 4 : 5;
        const struct qtype_kernels *ref = quant_kernels(t, ISA_SCALAR);
        for (int isa = ISA_AVX2; isa < ISA_COUNT; isa++) {
            const struct qtype_kernels *k = quant_kernels(t, (enum isa)isa);
            if (!k) continue;
            int checked_dot = 0, checked_gemm = 0, bad = 0;
            for (int ni = 0; ni < n_ns; ni++) {
                int n = ns[ni];
                size_t wrow = quant_row_size(t, n), arow = quant_row_size(at, n);
                for (int seed = 0; seed < 4; seed++) {
                    test_seed(1000u * (unsigned)seed + (unsigned)n + 77u * (unsigned)t);
                    /* gemm tile shapes up to 9 x 9 with padded strides */
                    int nw = 1 + (int)(test_rand() % 9), na = 1 + (int)(test_rand() % 9);
                    if (seed == 3 && ni == 0) { /* more activation rows than one pass of a tile takes */
                        nw = 13;
                        na = 37;
                    }
                    size_t wstride = wrow + 16 * (seed & 1), astride = arow + 32 * (seed >> 1);
                    size_t ostride = (size_t)nw + (size_t)(seed & 2);
                    uint8_t *w = calloc((size_t)nw, wstride), *a = calloc((size_t)na, astride);
                    for (int i = 0; i < nw; i++) make_weights(t, n, w + i * wstride, (i + seed) % 3);
                    for (int j = 0; j < na; j++) make_acts(at, n, a + j * astride, (j + seed) % 4 == 3);
                    float *out = malloc((size_t)na * ostride * sizeof(float));
                    for (size_t q = 0; q < (size_t)na * ostride; q++) out[q] = -12345.0f;
                    if (k->gemm_tile) k->gemm_tile(n, w, wstride, nw, a, astride, na, out, ostride);
                    for (int j = 0; j < na; j++) {
                        for (int i = 0; i < nw; i++) {
                            const void *wi = w + i * wstride, *aj = a + j * astride;
                            float want, got;
                            ref->vec_dot(n, &want, wi, aj);
                            double scale = abs_product_sum(t, at, n, wi, aj);
                            if (k->vec_dot) {
                                k->vec_dot(n, &got, wi, aj);
                                checked_dot++;
                                if (!close_enough(got, want, scale) && bad++ < 5)
                                    fprintf(stderr, "%s %s vec_dot n=%d: %.9g vs %.9g (scale %g)\n", tr->name,
                                            isa_name((enum isa)isa), n, got, want, scale);
                                CHECK(close_enough(got, want, scale));
                            }
                            if (k->gemm_tile) {
                                got = out[(size_t)j * ostride + (size_t)i];
                                checked_gemm++;
                                if (!close_enough(got, want, scale) && bad++ < 5)
                                    fprintf(stderr, "%s %s gemm_tile n=%d (%d,%d of %dx%d): %.9g vs %.9g\n", tr->name,
                                            isa_name((enum isa)isa), n, i, j, nw, na, got, want);
                                CHECK(close_enough(got, want, scale));
                            }
                        }
                        for (size_t q = (size_t)nw; q < ostride; q++) CHECK(out[(size_t)j * ostride + q] == -12345.0f);
                    }
                    free(w);
                    free(a);
                    free(out);
                }
            }
            printf("%-5s %-7s vec_dot %4d checks, gemm_tile %4d checks, %d off\n", tr->name, isa_name((enum isa)isa),
                   checked_dot, checked_gemm, bad);
            if (checked_dot + checked_gemm > 0) isa_covered[isa] = true;
        }
    }
}

/* The activation quantizers give the same bytes on every ISA, on hard cases:
 * exact .5 ties, zero blocks, a negative extreme, equal |max| of both signs. */
static void test_quantize_act(void) {
    static const enum qtype acts[] = {QT_Q8_K, QT_Q8_0, QT_Q8_1, QT_F16, QT_BF16, QT_F32};
    const int n = 4096;
    float *x = malloc(n * sizeof(float));
    uint8_t *ref = malloc((size_t)n * 4 + 4096), *got = malloc((size_t)n * 4 + 4096);
    for (int ai = 0; ai < (int)(sizeof acts / sizeof acts[0]); ai++) {
        enum qtype at = acts[ai];
        size_t bytes = quant_row_size(at, n);
        int compared = 0;
        for (int seed = 0; seed < 8; seed++) {
            test_seed(555u + (unsigned)seed);
            for (int i = 0; i < n; i++) x[i] = test_gauss() * (seed + 1);
            if (seed == 1) for (int i = 0; i < n; i++) x[i] = (float)((int)(test_rand() % 255) - 127) * 0.5f; /* ties */
            if (seed == 2) for (int i = 0; i < 512; i++) x[i] = 0.0f;
            if (seed == 3) { x[3] = -500.0f; x[700] = 500.0f; x[300] = 500.0f; x[301] = -500.0f; }
            if (seed == 4) for (int i = 0; i < n; i++) x[i] = (float)(i % 64) / 127.0f * ((i & 1) ? -1 : 1);
            const struct qtype_kernels *rk = quant_kernels(at, ISA_SCALAR);
            rk->quantize_act(x, ref, n);
            for (int isa = ISA_AVX2; isa < ISA_COUNT; isa++) {
                const struct qtype_kernels *k = quant_kernels(at, (enum isa)isa);
                if (!k || !k->quantize_act) continue;
                memset(got, 0xAB, bytes);
                k->quantize_act(x, got, n);
                compared++;
                CHECKF(memcmp(ref, got, bytes) == 0, "%s quantize_act on %s differs (seed %d)", quant_type_name(at),
                       isa_name((enum isa)isa), seed);
            }
            /* The public entry point (best ISA) as well. */
            memset(got, 0xAB, bytes);
            quant_quantize_act(at, x, got, n);
            CHECK(memcmp(ref, got, bytes) == 0);
        }
        printf("quantize_act %-4s: %d cross-ISA comparisons\n", quant_type_name(at), compared);
    }
    /* Q8_0 rounds halves away from zero, as ggml's reference does. */
    float tie[32];
    for (int i = 0; i < 32; i++) tie[i] = i == 0 ? 127.0f : (i & 1 ? 2.5f : -3.5f);
    struct block_q8_0 b;
    quant_quantize_act(QT_Q8_0, tie, &b, 32);
    CHECK(b.qs[0] == 127 && b.qs[1] == 3 && b.qs[2] == -4);
    free(x);
    free(ref);
    free(got);
}

/* Naive Q4_K: min/max per sub-block, no search. Ours must beat it. */
static double naive_q4k_rmse(const float *x, int n) {
    double err = 0;
    for (int b = 0; b < n; b += 32) {
        float mn = x[b], mx = x[b];
        for (int l = 1; l < 32; l++) { if (x[b + l] < mn) mn = x[b + l]; if (x[b + l] > mx) mx = x[b + l]; }
        if (mn > 0) mn = 0;
        float d = (mx - mn) / 15;
        for (int l = 0; l < 32; l++) {
            int q = d > 0 ? (int)lrintf((x[b + l] - mn) / d) : 0;
            q = q < 0 ? 0 : q > 15 ? 15 : q;
            double e = d * q + mn - x[b + l];
            err += e * e;
        }
    }
    return sqrt(err / n);
}

static void test_roundtrip(void) {
    struct { enum qtype t; double max_rmse; } cases[] = {
        {QT_Q4_0, 0.095}, {QT_Q4_1, 0.095}, {QT_Q5_0, 0.05}, {QT_Q5_1, 0.05}, {QT_Q8_0, 0.006}, {QT_Q4_K, 0.08}, {QT_Q5_K, 0.04}, {QT_Q6_K, 0.02},
        {QT_F16, 0.0005}, {QT_BF16, 0.004}, {QT_F32, 0.0},
    };
    const int n = 256 * 64;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *q = malloc((size_t)n * 4);
    test_seed(4242);
    for (int i = 0; i < n; i++) x[i] = test_gauss();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct qtype_traits *tr = quant_traits(cases[c].t);
        tr->from_float(x, q, n);
        tr->to_float(q, y, n);
        double err = 0;
        for (int i = 0; i < n; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        double rmse = sqrt(err / n);
        printf("round trip %-5s rmse %.5f of sigma (bound %.4f)\n", tr->name, rmse, cases[c].max_rmse);
        CHECKF(rmse <= cases[c].max_rmse, "%s rmse %g", tr->name, rmse);
        if (cases[c].t == QT_Q4_K) {
            double naive = naive_q4k_rmse(x, n);
            printf("naive min/max 4-bit rmse %.5f\n", naive);
            CHECK(rmse < naive);
        }
    }
    /* Constant and all-zero blocks come back exactly zero / finite. */
    for (int i = 0; i < 512; i++) x[i] = 0.0f;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct qtype_traits *tr = quant_traits(cases[c].t);
        tr->from_float(x, q, 512);
        tr->to_float(q, y, 512);
        int ok = 1;
        for (int i = 0; i < 512; i++) ok &= y[i] == 0.0f;
        CHECKF(ok, "%s zeros", tr->name);
    }
    free(x);
    free(y);
    free(q);
}

/* ggml's dequantization of the 32-value types written out value by value
 * from the block layout: Q4_1 and Q5_1 y = d q + m, Q5_0 y = d (q - 16);
 * value v's low four bits are the low (v < 16) or high nibble of qs[v % 16],
 * its fifth bit is bit v % 8 of qh[v / 8]. */
static float naive_value(enum qtype t, const uint8_t *blk, int v) {
    const bool has_min = t != QT_Q5_0, has_fifth = t != QT_Q4_1;
    uint16_t d16, m16 = 0;
    memcpy(&d16, blk, 2);
    if (has_min) memcpy(&m16, blk + 2, 2);
    const uint8_t *qh = blk + (has_min ? 4 : 2);
    const uint8_t *qs = has_fifth ? qh + 4 : qh;
    int q = v < 16 ? qs[v] & 15 : qs[v - 16] >> 4;
    if (has_fifth) q |= (qh[v / 8] >> (v % 8) & 1) << 4;
    const float d = fp16_to_f32(d16);
    if (t == QT_Q5_0) return (float)(q - 16) * d;
    return (float)q * d + fp16_to_f32(m16);
}

static uint32_t bits(float f);

/* to_float of Q4_1 / Q5_0 / Q5_1 against naive_value, bit for bit, on
 * random bytes (every code pattern, every fp16 scale and min, NaN and
 * infinity included; the 2^-10 of Q4_1/Q5_1 blocks whose d and m are both
 * NaN only need to give NaN); Q8_1 is Q8_0 plus s = fp16(d * sum(q)) with d before
 * its rounding; and quantize(dequantize(q)) == q for the types' own output. */
static void test_b32_formats(void) {
    static const enum qtype types[] = {QT_Q4_1, QT_Q5_0, QT_Q5_1};
    enum { NB = 4096 };
    uint8_t *raw = malloc((size_t)NB * 24), *again = malloc((size_t)NB * 24);
    float *y = malloc((size_t)NB * 32 * sizeof *y), *x = malloc((size_t)NB * 32 * sizeof *x);
    test_seed(9090);
    for (int ti = 0; ti < 3; ti++) {
        enum qtype t = types[ti];
        const struct qtype_traits *tr = quant_traits(t);
        for (size_t i = 0; i < (size_t)NB * tr->type_size; i++) raw[i] = (uint8_t)test_rand();
        tr->to_float(raw, y, NB * 32);
        int bad = 0;
        for (int b = 0; b < NB; b++)
            for (int v = 0; v < 32; v++) {
                /* where a NaN d meets a NaN m, which payload survives is the compiler's choice */
                const float want = naive_value(t, raw + (size_t)b * tr->type_size, v), got = y[b * 32 + v];
                bad += bits(got) != bits(want) && !(isnan(got) && isnan(want));
            }
        CHECKF(bad == 0, "%s: %d values dequantize differently from the written-out formula", tr->name, bad);
        /* the type's quantizer on gaussian rows, with zero and constant blocks */
        for (int i = 0; i < NB * 32; i++) x[i] = (0.01f + (float)(i / 4096)) * test_gauss();
        for (int i = 0; i < 64; i++) x[i] = i < 32 ? 0.0f : 0.25f;
        tr->from_float(x, raw, NB * 32);
        tr->to_float(raw, y, NB * 32);
        tr->from_float(y, again, NB * 32);
        CHECKF(memcmp(raw, again, (size_t)NB * tr->type_size) == 0, "%s: quantize(dequantize(q)) != q", tr->name);
    }
    for (int i = 0; i < NB * 32; i++) x[i] = test_gauss() * (float)(1 + i % 7);
    struct block_q8_1 *a = (struct block_q8_1 *)(void *)raw;
    struct block_q8_0 b;
    int bad = 0;
    for (int blk = 0; blk < 512; blk++) {
        const float *xb = x + blk * 32;
        quant_kernels(QT_Q8_1, ISA_SCALAR)->quantize_act(xb, &a[blk], 32);
        quant_kernels(QT_Q8_0, ISA_SCALAR)->quantize_act(xb, &b, 32);
        float amax = 0;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
            sum += b.qs[j];
        }
        bad += a[blk].d != b.d || memcmp(a[blk].qs, b.qs, 32) || a[blk].s != f32_to_fp16((float)sum * (amax / 127));
    }
    CHECKF(bad == 0, "%d Q8_1 blocks are not Q8_0 plus their sum", bad);
    free(raw);
    free(again);
    free(x);
    free(y);
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_fp16_bf16(void) {
    /* Every half: to float and back is the identity (NaNs stay NaNs), and the
     * dispatched row conversions (F16C / NEON where present) agree bit for bit. */
    static uint16_t h[65536], h2[65536];
    static float f[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    fp16_to_f32_row(h, f, 65536);
    int bad = 0, nan_ok = 1;
    for (int i = 0; i < 65536; i++) {
        float s = fp16_to_f32((uint16_t)i);
        bad += bits(s) != bits(f[i]);
        bool is_nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        if (is_nan) nan_ok &= isnan(s) && (f32_to_fp16(s) & 0x7fff) > 0x7c00;
        else bad += f32_to_fp16(s) != i;
    }
    CHECKF(bad == 0, "%d halves convert differently", bad);
    CHECK(nan_ok);
    CHECK(fp16_to_f32(0x3c00) == 1.0f && fp16_to_f32(0xc000) == -2.0f && fp16_to_f32(0x0001) == 0x1p-24f);
    CHECK(fp16_to_f32(0x7c00) == INFINITY && fp16_to_f32(0x7bff) == 65504.0f);
    /* float -> half over a spread of bit patterns: scalar vs the row kernel. */
    bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 65536ull * 89) {
        for (int i = 0; i < 65536; i++) f[i] = from_bits((uint32_t)(u + (uint64_t)i * 89));
        f32_to_fp16_row(f, h2, 65536);
        for (int i = 0; i < 65536; i++) bad += h2[i] != f32_to_fp16(f[i]);
    }
    CHECKF(bad == 0, "%d floats convert to half differently", bad);
    /* Rounding: ties to even, overflow to inf, underflow to zero. */
    CHECK(f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);              /* tie, even stays */
    CHECK(f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);          /* tie, rounds up to even */
    CHECK(f32_to_fp16(65519.0f) == 0x7bff && f32_to_fp16(65520.0f) == 0x7c00);
    CHECK(f32_to_fp16(0x1p-25f) == 0 && f32_to_fp16(0x1.8p-25f) == 1 && f32_to_fp16(-0x1p-24f) == 0x8001);
    /* bf16 */
    int bbad = 0;
    for (int i = 0; i < 65536; i++) {
        float v = bf16_to_f32((uint16_t)i);
        bool is_nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        if (is_nan) bbad += !isnan(v) || f32_to_bf16(v) != (uint16_t)(i | 64);
        else bbad += f32_to_bf16(v) != i;
    }
    CHECKF(bbad == 0, "%d bf16 round trips", bbad);
    CHECK(f32_to_bf16(from_bits(0x3f808000)) == 0x3f80); /* tie to even */
    CHECK(f32_to_bf16(from_bits(0x3f818000)) == 0x3f82);
    CHECK(f32_to_bf16(from_bits(0x3f808001)) == 0x3f81);
    CHECK(f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80); /* rounds to inf */
}

static void test_table(void) {
    CHECK(quant_row_size(QT_Q4_K, 512) == 288);
    CHECK(quant_row_size(QT_Q4_K, 100) == 0);
    CHECK(quant_row_size(QT_Q8_0, 64) == 68);
    CHECK(quant_row_size(QT_F16, 3) == 6);
    CHECK(quant_row_size(QT_Q5_0, 64) == 44 && quant_row_size(QT_Q5_1, 32) == 24 && quant_row_size(QT_Q4_1, 96) == 60);
    CHECK(quant_row_size(QT_Q8_1, 32) == 36 && quant_row_size(QT_Q5_0, 48) == 0);
    CHECK(quant_row_size((enum qtype)10, 256) == 0);
    CHECK(quant_traits((enum qtype)10) == NULL);
    CHECK(quant_traits((enum qtype)99) == NULL);
    CHECK(strcmp(quant_type_name(QT_Q6_K), "Q6_K") == 0);
    CHECK(strcmp(quant_type_name(QT_Q5_0), "Q5_0") == 0);
    CHECK(strcmp(quant_type_name((enum qtype)10), "Q2_K") == 0);
    CHECK(strcmp(quant_type_name((enum qtype)77), "?") == 0);
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const struct qtype_traits *tr = quant_traits(weight_types[ti]);
        CHECK(tr && tr->supported && tr->vec_dot && tr->gemm_tile && tr->to_float && tr->from_float);
    }
    CHECK(quant_traits(QT_Q4_K)->vec_dot_type == QT_Q8_K);
    CHECK(quant_traits(QT_Q4_0)->vec_dot_type == QT_Q8_0);
    CHECK(quant_traits(QT_Q5_0)->vec_dot_type == QT_Q8_0);
    CHECK(quant_traits(QT_Q4_1)->vec_dot_type == QT_Q8_1 && quant_traits(QT_Q5_1)->vec_dot_type == QT_Q8_1);
    CHECK(quant_traits(QT_Q8_1) && !quant_traits(QT_Q8_1)->supported); /* an activation type only */
    CHECK(quant_traits(QT_BF16)->vec_dot_type == QT_BF16);
    CHECK(quant_kernels(QT_Q4_K, ISA_SCALAR) != NULL);
    printf("active ISA: %s\n", isa_name(quant_active_isa()));

    /* quant_init caps the choice; the environment plays no part. */
    enum isa best = quant_active_isa(), named;
    setenv("MOEX_ISA", "scalar", 1);
    quant_init(ISA_COUNT);
    CHECK(quant_active_isa() == best);
    unsetenv("MOEX_ISA");
    quant_init(ISA_SCALAR);
    CHECK(quant_active_isa() == ISA_SCALAR);
    CHECK(quant_traits(QT_Q4_K)->vec_dot == quant_kernels(QT_Q4_K, ISA_SCALAR)->vec_dot);
    quant_init(ISA_COUNT);
    CHECK(quant_active_isa() == best);
    for (int i = 0; i < ISA_COUNT; i++)
        CHECK(isa_from_name(isa_name((enum isa)i), &named) == 0 && named == (enum isa)i);
    CHECK(isa_from_name("avx3", &named) == -1 && isa_from_name("", &named) == -1 && isa_from_name(NULL, &named) == -1);
}

static void report_coverage(void) {
    printf("kernels compared with scalar on:");
    int n = 0;
    for (int isa = ISA_AVX2; isa < ISA_COUNT; isa++)
        if (isa_covered[isa]) {
            printf(" %s", isa_name((enum isa)isa));
            n++;
        }
    printf("%s\n", n ? "" : " (no SIMD ISA on this machine)");
#if defined(MOEX_EMULATED_AVX512)
    /* the point of an emulation build (MOEX_EMULATE_AVX512) */
    CHECKF(isa_covered[ISA_AVX512], "AVX-512 emulation build, but the avx512 kernels were not tested");
    CHECK(quant_active_isa() == ISA_AVX512);
    const struct qtype_kernels *k = quant_kernels(QT_Q4_K, ISA_AVX512);
    CHECK(k && quant_traits(QT_Q4_K)->gemm_tile == k->gemm_tile);
#endif
}

int main(void) {
    test_table();
    test_fp16_bf16();
    test_quantize_act();
    test_roundtrip();
    test_b32_formats();
    test_dots();
    report_coverage();
    return test_finish();
}
