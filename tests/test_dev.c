/* Devices and packing: every pack path equals dequantize-then-quantize bit
 * for bit for every source type; every device that runs here equals the cpu
 * reference bit for bit (Qwen3-30B-A3B expert shapes, odd shapes, M from 1
 * to 300); errors come back as codes; counters move. */
#include "dev_host.h"
#include "harness.h"

#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "dev/dev.h"
#include "pack/pack.h"
#include "pack/w8a8.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rnd(void) { return (uint32_t)(test_rand() >> 16); }
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xFFFFFF) / 16777216.0f; }

/* The AVX2 pack path runs when the CPU has AVX2 and the ISA ceiling allows it. */
static bool avx2_on(void) { return quant_active_isa() == ISA_AVX2 || quant_active_isa() == ISA_AVX512; }
/* The NEON pack path runs when the CPU has NEON dotprod and the ISA ceiling allows it. */
static bool neon_on(void) { return quant_active_isa() == ISA_NEON; }
/* A fused SIMD path this machine does not run: PACK_E_TYPE is its answer. */
static bool path_absent(int p) {
    return (p == PACK_PATH_FUSED_AVX2 && !avx2_on()) || (p == PACK_PATH_FUSED_NEON && !neon_on());
}

static const enum qtype all_types[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_Q4_0, QT_Q5_0,
                                       QT_Q5_1, QT_Q4_1, QT_F16,  QT_BF16, QT_F32};
enum { N_TYPES = sizeof all_types / sizeof all_types[0] };

/* N rows of K values of type t: half of the rows quantized from Gaussian
 * floats (realistic), half random bytes with sane fp16 scales (every code
 * pattern, either sign of d). */
static void *make_weight(enum qtype t, int K, int N) {
    size_t row = quant_row_size(t, K);
    char *w = malloc(row * (size_t)N);
    float *x = malloc((size_t)K * sizeof *x);
    const struct qtype_traits *tr = quant_traits(t);
    for (int n = 0; n < N; n++) {
        char *dst = w + row * (size_t)n;
        float amp = uniform(0.01f, 2.0f);
        for (int k = 0; k < K; k++) x[k] = amp * test_gauss();
        if (n % 2 == 0 || t == QT_F16 || t == QT_BF16 || t == QT_F32) {
            tr->from_float(x, dst, K);
            continue;
        }
        for (size_t i = 0; i < row; i++) dst[i] = (char)rnd();
        int nb = K / tr->block_size;
        for (int b = 0; b < nb; b++) {
            char *blk = dst + (size_t)b * tr->type_size;
            uint16_t d = f32_to_fp16(uniform(-0.05f, 0.05f)), dmin = f32_to_fp16(uniform(-0.05f, 0.05f));
            switch (t) {
            case QT_Q4_K: ((struct block_q4_K *)(void *)blk)->d = d; ((struct block_q4_K *)(void *)blk)->dmin = dmin; break;
            case QT_Q5_K: ((struct block_q5_K *)(void *)blk)->d = d; ((struct block_q5_K *)(void *)blk)->dmin = dmin; break;
            case QT_Q6_K: ((struct block_q6_K *)(void *)blk)->d = d; break;
            case QT_Q8_0: ((struct block_q8_0 *)(void *)blk)->d = d; break;
            case QT_Q4_0: ((struct block_q4_0 *)(void *)blk)->d = d; break;
            case QT_Q5_0: ((struct block_q5_0 *)(void *)blk)->d = d; break;
            case QT_Q5_1: ((struct block_q5_1 *)(void *)blk)->d = d; ((struct block_q5_1 *)(void *)blk)->m = dmin; break;
            case QT_Q4_1: ((struct block_q4_1 *)(void *)blk)->d = d; ((struct block_q4_1 *)(void *)blk)->m = dmin; break;
            default: break;
            }
        }
    }
    free(x);
    return w;
}

/* The rule written independently: dequantize the whole row with the scalar
 * kernel, max |w|, divide, rintf (nearest even), clamp. */
static void reference_row(enum qtype t, const void *row, int K, int8_t *q, float *scale) {
    float *x = malloc((size_t)K * sizeof *x);
    quant_kernels(t, ISA_SCALAR)->to_float(row, x, K);
    float amax = 0;
    for (int k = 0; k < K; k++) amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    float s = amax / 127.0f;
    for (int k = 0; k < K; k++) {
        float v = s == 0.0f ? 0.0f : rintf(x[k] / s);
        q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    *scale = s;
    free(x);
}

static void test_rounding_rule(void) {
    /* amax 127 makes the scale exactly 1: x.5 values are ties */
    const float x[8] = {127.0f, 2.5f, -3.5f, 0.5f, 1.5f, -0.5f, -127.0f, 126.49f};
    const int8_t want[8] = {127, 2, -4, 0, 2, 0, -127, 126};
    int8_t q[8], qv[40];
    float s;
    CHECK(w8a8_quantize_row(x, 8, q, &s) == 0);
    CHECK(s == 1.0f);
    CHECK(memcmp(q, want, 8) == 0);
    /* the SIMD quantizer (32 at a time) agrees with the scalar one, ties included */
    float y[40];
    for (int i = 0; i < 40; i++) y[i] = i < 8 ? x[i] : (float)((int)(rnd() % 254) - 127) + 0.5f;
    int8_t ref[40];
    w8a8_quantize_ref(y, 40, 1.0f, ref);
    w8a8_quantize(y, 40, 1.0f, qv);
    CHECK(memcmp(ref, qv, 40) == 0);
    /* activations: rows with their own scales; non-finite is an error */
    float act[3][64];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 64; k++) act[r][k] = (float)(r + 1) * test_gauss();
    int8_t qa[3][64];
    float sa[3];
    CHECK(w8a8_quantize_act(&act[0][0], 3, 64, 64, &qa[0][0], sa) == 0);
    for (int r = 0; r < 3; r++) {
        int8_t rq[64];
        float rs;
        CHECK(w8a8_quantize_row(act[r], 64, rq, &rs) == 0);
        CHECK(rs == sa[r] && memcmp(rq, qa[r], 64) == 0);
    }
    act[1][5] = NAN;
    CHECK(w8a8_quantize_act(&act[0][0], 3, 64, 64, &qa[0][0], sa) == -1);
    float zeros[40] = {0};
    CHECK(w8a8_quantize_row(zeros, 40, qv, &s) == 0 && s == 0.0f && qv[0] == 0 && qv[39] == 0);
}

static void test_pack_rows(void) {
    const enum pack_path paths[] = {PACK_PATH_BEST, PACK_PATH_GENERIC, PACK_PATH_FUSED_SCALAR, PACK_PATH_FUSED_AVX2,
                                    PACK_PATH_FUSED_NEON};
    const int Ks[] = {256, 2048, 768, 100}; /* 100: the tails of the per-value types */
    for (int ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = all_types[ti];
        for (int ki = 0; ki < 4; ki++) {
            const int K = Ks[ki], N = 24;
            if (K % quant_traits(t)->block_size) continue;
            char *w = make_weight(t, K, N);
            size_t row = quant_row_size(t, K);
            int8_t *q = malloc((size_t)K), *rq = malloc((size_t)K);
            for (int pi = 0; pi < 5; pi++) {
                int bad = 0, ran = 0;
                for (int n = 0; n < N; n++) {
                    float s = -1, rs;
                    int rc = pack_row(paths[pi], t, w + row * (size_t)n, K, q, &s);
                    if (rc == PACK_E_TYPE && paths[pi] >= PACK_PATH_FUSED_SCALAR) break; /* no such path for t */
                    ran++;
                    reference_row(t, w + row * (size_t)n, K, rq, &rs);
                    if (rc != PACK_OK || s != rs || memcmp(q, rq, (size_t)K)) bad++;
                }
                CHECKF(bad == 0, "%s K=%d path %d: %d of %d rows differ from the reference", quant_type_name(t), K,
                       (int)paths[pi], bad, ran);
            }
            free(q);
            free(rq);
            free(w);
        }
    }
    const enum qtype fused_avx2[] = {QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_Q8_0, QT_F16, QT_BF16};
    for (int i = 0; i < 6; i++)
        CHECKF(!avx2_on() || pack_row(PACK_PATH_FUSED_AVX2, fused_avx2[i], (char[512]){0}, 256, (int8_t[256]){0},
                                      &(float){0}) == PACK_OK,
               "the AVX2 path of %s runs on an AVX2 machine", quant_type_name(fused_avx2[i]));
    CHECKF(!neon_on() || pack_row(PACK_PATH_FUSED_NEON, QT_Q4_K, (char[144]){0}, 256, (int8_t[256]){0},
                                  &(float){0}) == PACK_OK,
           "the NEON path of Q4_K runs on a NEON machine");
}

/* One row on every path that has t: the reference's codes and scale, or
 * PACK_E_VALUE on every path when want_error. Returns the paths that differ. */
static int check_row_paths(enum qtype t, const void *row, int K, bool want_error) {
    const enum pack_path paths[] = {PACK_PATH_BEST, PACK_PATH_GENERIC, PACK_PATH_FUSED_SCALAR, PACK_PATH_FUSED_AVX2,
                                    PACK_PATH_FUSED_NEON};
    int8_t *q = malloc((size_t)K), *rq = malloc((size_t)K);
    float rs = 0;
    if (!want_error) reference_row(t, row, K, rq, &rs);
    int bad = 0;
    for (int pi = 0; pi < 5; pi++) {
        float s = -1;
        int rc = pack_row(paths[pi], t, row, K, q, &s);
        if (rc == PACK_E_TYPE && paths[pi] >= PACK_PATH_FUSED_SCALAR) continue; /* no such path for t */
        bool ok = want_error ? rc == PACK_E_VALUE : rc == PACK_OK && s == rs && !memcmp(q, rq, (size_t)K);
        if (!ok) fprintf(stderr, "  %s K=%d path %d: rc %d\n", quant_type_name(t), K, (int)paths[pi], rc);
        bad += !ok;
    }
    free(q);
    free(rq);
    return bad;
}

/* The fused paths find the row maximum from bounds on each sub-block and
 * read few sub-blocks' codes, skip the clamp where it cannot act, and
 * decide non-finite rows from the scales: rows made to try each of these. */
static void test_pack_fused_edges(void) {
    /* Q6_K: the largest sub-block scale with codes of 32 (values 0), the
     * row maximum in a sub-block of a smaller scale; the extreme scale -128
     * and code 0 (value -32); a zero scale d; an infinite or NaN d. */
    struct block_q6_K b6[2];
    memset(b6, 0, sizeof b6);
    for (int i = 0; i < 2; i++) {
        b6[i].d = f32_to_fp16(i ? -0.013f : 0.021f);
        for (int j = 0; j < 16; j++) b6[i].scales[j] = (int8_t)(j + 1);
        for (int j = 0; j < 128; j++) b6[i].ql[j] = (uint8_t)(rnd() & 0xEE); /* nibbles 0-14 */
        for (int j = 0; j < 64; j++) b6[i].qh[j] = 0xAA; /* with ql: codes 32-46 */
    }
    b6[0].scales[0] = 127;
    b6[1].qh[40] = 0x00; b6[1].ql[72] = 0x00; /* codes 0 (value -32) in the second block, first half */
    CHECK(check_row_paths(QT_Q6_K, b6, 512, false) == 0);
    b6[1].scales[5] = -128;
    CHECK(check_row_paths(QT_Q6_K, b6, 512, false) == 0);
    b6[1].d = 0;
    CHECK(check_row_paths(QT_Q6_K, b6, 512, false) == 0);
    b6[0].d = b6[1].d = 0;
    CHECK(check_row_paths(QT_Q6_K, b6, 512, false) == 0); /* all zero: scale 0 */
    b6[1].d = 0x7C00;
    CHECK(check_row_paths(QT_Q6_K, b6, 512, true) == 0);
    b6[1].d = 0xFE00;
    CHECK(check_row_paths(QT_Q6_K, b6, 512, true) == 0);
    /* Q5_K and Q4_K: a sub-block with the largest bound whose codes sit in
     * the middle, the maximum elsewhere; dmin of either sign; non-finite d or dmin */
    struct block_q5_K b5[2];
    struct block_q4_K b4[2];
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < sizeof b5[i]; k++) ((uint8_t *)&b5[i])[k] = (uint8_t)rnd();
        for (size_t k = 0; k < sizeof b4[i]; k++) ((uint8_t *)&b4[i])[k] = (uint8_t)rnd();
        b5[i].d = b4[i].d = f32_to_fp16(0.01f);
        b5[i].dmin = b4[i].dmin = f32_to_fp16(i ? 0.02f : -0.005f);
    }
    memset(b5[0].qs, 0x77, 32); /* sub-blocks 0, 1: nibbles 7 ... */
    memset(b5[0].qh, 0, 32);    /* ... and no fifth bit: codes 7 */
    memset(b4[0].qs, 0x88, 32);
    b5[0].scales[0] = b4[0].scales[0] = 63; /* sub-block 0: scale 63, min 0 (scales[4] low bits) */
    b5[0].scales[4] = b4[0].scales[4] = 0;
    CHECK(check_row_paths(QT_Q5_K, b5, 512, false) == 0);
    CHECK(check_row_paths(QT_Q4_K, b4, 512, false) == 0);
    b5[1].dmin = 0x7C00;
    b4[1].d = 0xFC00;
    CHECK(check_row_paths(QT_Q5_K, b5, 512, true) == 0);
    CHECK(check_row_paths(QT_Q4_K, b4, 512, true) == 0);
    b5[1].dmin = b4[1].d = 0;
    b5[0].d = b4[0].d = 0x7E00;
    CHECK(check_row_paths(QT_Q5_K, b5, 512, true) == 0);
    CHECK(check_row_paths(QT_Q4_K, b4, 512, true) == 0);
    /* Q5_0: the largest bound (|d| 0.02) in a block whose codes are all 17
     * (values d), the maximum elsewhere (block 0 holds codes 0: -16 d); d of
     * either sign, zero, infinite, NaN */
    struct block_q5_0 b50[3];
    for (int i = 0; i < 3; i++) {
        for (size_t k = 0; k < sizeof b50[i]; k++) ((uint8_t *)&b50[i])[k] = (uint8_t)rnd();
        b50[i].d = f32_to_fp16(i == 1 ? -0.011f : 0.01f);
    }
    memset(b50[2].qs, 0x11, sizeof b50[2].qs); /* nibbles 1 ... */
    memset(b50[2].qh, 0xFF, sizeof b50[2].qh); /* ... with the fifth bit: codes 17 */
    b50[2].d = f32_to_fp16(0.02f);
    b50[0].qs[3] = 0x00;
    memset(b50[0].qh, 0, sizeof b50[0].qh); /* block 0: codes <= 15, one value -16 d */
    CHECK(check_row_paths(QT_Q5_0, b50, 96, false) == 0);
    b50[1].d = 0;
    CHECK(check_row_paths(QT_Q5_0, b50, 96, false) == 0);
    b50[0].d = b50[1].d = b50[2].d = 0;
    CHECK(check_row_paths(QT_Q5_0, b50, 96, false) == 0);
    b50[2].d = 0x7C00;
    CHECK(check_row_paths(QT_Q5_0, b50, 96, true) == 0);
    b50[2].d = 0xFE00;
    CHECK(check_row_paths(QT_Q5_0, b50, 96, true) == 0);
    /* F16 and BF16: ties at scale 1 (max 127), subnormals only (BF16's
     * reach float's subnormals, where the clamp acts), the largest finite
     * values, infinities and NaNs; K = 100 and 37 have tails */
    const int K = 100;
    uint16_t h[100], bf[100];
    for (int k = 0; k < K; k++) {
        float v = k == 0 ? 127.0f : (float)((int)(rnd() % 254) - 127) + (k % 2 ? 0.5f : 0.0f);
        h[k] = f32_to_fp16(v);
        bf[k] = f32_to_bf16(v);
    }
    CHECK(check_row_paths(QT_F16, h, K, false) == 0);
    CHECK(check_row_paths(QT_BF16, bf, K, false) == 0);
    CHECK(check_row_paths(QT_F16, h, 37, false) == 0);
    for (int k = 0; k < K; k++) {
        h[k] = (uint16_t)((rnd() & 0x83FF));   /* fp16 subnormals of either sign */
        bf[k] = (uint16_t)((rnd() & 0x807F)); /* float subnormals of either sign */
    }
    bf[7] = 0x0060;
    CHECK(check_row_paths(QT_F16, h, K, false) == 0);
    CHECK(check_row_paths(QT_BF16, bf, K, false) == 0);
    h[50] = 0x7BFF; /* 65504 */
    bf[50] = 0xFF7F; /* -3.39e38 */
    CHECK(check_row_paths(QT_F16, h, K, false) == 0);
    CHECK(check_row_paths(QT_BF16, bf, K, false) == 0);
    memset(h, 0, sizeof h);
    memset(bf, 0, sizeof bf);
    h[3] = bf[3] = 0x8000; /* -0 */
    CHECK(check_row_paths(QT_F16, h, K, false) == 0);
    CHECK(check_row_paths(QT_BF16, bf, K, false) == 0);
    const uint16_t bad16[] = {0x7C00, 0xFC00, 0x7E00, 0xFFFF}, bad_bf[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFFF};
    for (int i = 0; i < 4; i++) {
        h[99 - 30 * i] = bad16[i];
        bf[99 - 30 * i] = bad_bf[i];
        CHECKF(check_row_paths(QT_F16, h, K, true) == 0, "F16 %04x", bad16[i]);
        CHECKF(check_row_paths(QT_BF16, bf, K, true) == 0, "BF16 %04x", bad_bf[i]);
        h[99 - 30 * i] = bf[99 - 30 * i] = 0;
    }
}

static void test_pack_errors(void) {
    int8_t q[512];
    float s;
    /* a zero row: scale 0, codes 0 */
    struct block_q4_K zero[2];
    memset(zero, 0, sizeof zero);
    for (int p = PACK_PATH_BEST; p <= PACK_PATH_FUSED_NEON; p++) {
        memset(q, 1, sizeof q);
        int rc = pack_row((enum pack_path)p, QT_Q4_K, zero, 512, q, &s);
        CHECK(rc == PACK_OK || path_absent(p));
        if (rc == PACK_OK) CHECK(s == 0.0f && q[0] == 0 && q[511] == 0);
    }
    /* infinite and NaN scales, NaN floats: an error on every path */
    struct block_q4_K inf_blk[2];
    memset(inf_blk, 0x11, sizeof inf_blk);
    inf_blk[0].d = inf_blk[1].d = 0x3C00;
    inf_blk[0].dmin = inf_blk[1].dmin = 0x3C00;
    inf_blk[1].d = 0x7C00; /* +inf */
    struct block_q8_0 nan_blk[2];
    memset(nan_blk, 3, sizeof nan_blk);
    nan_blk[0].d = 0x3C00;
    nan_blk[1].d = 0x7E00; /* NaN */
    float f32[64];
    for (int i = 0; i < 64; i++) f32[i] = (float)i;
    f32[40] = INFINITY;
    for (int p = PACK_PATH_BEST; p <= PACK_PATH_FUSED_NEON; p++) {
        if (path_absent(p)) continue;
        CHECKF(pack_row((enum pack_path)p, QT_Q4_K, inf_blk, 512, q, &s) == PACK_E_VALUE, "Q4_K inf, path %d", p);
        if (p != PACK_PATH_FUSED_NEON) /* Q4_K only */
            CHECKF(pack_row((enum pack_path)p, QT_Q8_0, nan_blk, 64, q, &s) == PACK_E_VALUE, "Q8_0 NaN, path %d", p);
    }
    CHECK(pack_row(PACK_PATH_BEST, QT_F32, f32, 64, q, &s) == PACK_E_VALUE);
    CHECK(pack_row(PACK_PATH_GENERIC, QT_F32, f32, 64, q, &s) == PACK_E_VALUE);
    /* K not a multiple of the block, unknown types, no fused path */
    CHECK(pack_row(PACK_PATH_BEST, QT_Q4_K, zero, 100, q, &s) == PACK_E_TYPE);
    CHECK(pack_row(PACK_PATH_BEST, (enum qtype)5, zero, 64, q, &s) == PACK_E_TYPE);
    CHECK(pack_row(PACK_PATH_FUSED_SCALAR, QT_F16, zero, 256, q, &s) == PACK_E_TYPE);
    CHECK(pack_check_shape(PACK_AMX, 96, 16) == PACK_E_SHAPE);
    CHECK(pack_check_shape(PACK_AMX, 128, 24) == PACK_E_SHAPE);
    CHECK(pack_check_shape(PACK_ROWS, 100, 37) == PACK_OK);
    CHECK(pack_check_shape(PACK_ROWS, PACK_MAX_K + 1, 1) == PACK_E_SHAPE);
    CHECK(strlen(pack_status_string(PACK_E_VALUE)) > 0);
}

/* A matrix packed with 2 threads in both layouts equals row-by-row packing. */
static void test_pack_matrix(struct threadpool *pool) {
    const int K = 512, N = 80;
    char *w = make_weight(QT_Q4_K, K, N);
    size_t row = quant_row_size(QT_Q4_K, K);
    int8_t *rows = malloc((size_t)K * N), *amx = malloc((size_t)K * N), *q = malloc((size_t)K);
    float *s_rows = malloc(N * sizeof(float)), *s_amx = malloc(N * sizeof(float));
    CHECK(pack_matrix(pool, PACK_PATH_BEST, QT_Q4_K, w, K, N, PACK_ROWS, rows, s_rows) == PACK_OK);
    CHECK(pack_matrix(NULL, PACK_PATH_GENERIC, QT_Q4_K, w, K, N, PACK_AMX, amx, s_amx) == PACK_OK);
    int bad = 0;
    for (int n = 0; n < N; n++) {
        float s;
        pack_row(PACK_PATH_GENERIC, QT_Q4_K, w + row * (size_t)n, K, q, &s);
        bad += s != s_rows[n] || s != s_amx[n];
        for (int k = 0; k < K; k++)
            bad += pack_code_at(PACK_ROWS, rows, K, n, k) != q[k] || pack_code_at(PACK_AMX, amx, K, n, k) != q[k];
    }
    CHECKF(bad == 0, "%d codes or scales differ between layouts", bad);
    CHECK(pack_bytes(PACK_AMX, K, N) == (size_t)K * N);
    /* a NaN in one row fails the whole matrix */
    float *f = malloc((size_t)K * N * sizeof *f);
    for (int i = 0; i < K * N; i++) f[i] = test_gauss();
    f[K * 70 + 3] = NAN;
    CHECK(pack_matrix(pool, PACK_PATH_BEST, QT_F32, f, K, N, PACK_ROWS, rows, s_rows) == PACK_E_VALUE);
    free(f);
    free(w);
    free(rows);
    free(amx);
    free(q);
    free(s_rows);
    free(s_amx);
}

/* The 32-value types have no fused path: pack of such an expert (the
 * Q4_K_M fallback for rows of 128: K = 128) equals pack of its dequantized
 * floats, in both layouts, rows split over the pool. */
static void test_pack_b32_experts(struct threadpool *pool) {
    const enum qtype types[] = {QT_Q5_0, QT_Q5_1, QT_Q4_1};
    const int shapes[3][2] = {{128, 256}, {256, 48}, {96, 40}}; /* K, N */
    for (int ti = 0; ti < 3; ti++)
        for (int si = 0; si < 3; si++) {
            const enum qtype t = types[ti];
            const int K = shapes[si][0], N = shapes[si][1];
            char *w = make_weight(t, K, N);
            float *f = malloc((size_t)K * N * sizeof *f);
            quant_kernels(t, ISA_SCALAR)->to_float(w, f, (int64_t)K * N);
            int8_t *codes = malloc((size_t)K * N), *want = malloc((size_t)K * N);
            float *scales = malloc((size_t)N * sizeof *scales), *want_scales = malloc((size_t)N * sizeof *want_scales);
            const enum pack_layout layouts[] = {PACK_ROWS, PACK_AMX};
            for (int li = 0; li < 2; li++) {
                if (pack_check_shape(layouts[li], K, N) != PACK_OK) continue;
                int rc = pack_matrix(pool, PACK_PATH_BEST, t, w, K, N, layouts[li], codes, scales);
                int rc_f = pack_matrix(NULL, PACK_PATH_BEST, QT_F32, f, K, N, layouts[li], want, want_scales);
                CHECKF(rc == PACK_OK && rc_f == PACK_OK, "%s %dx%d layout %d: %d %d", quant_type_name(t), K, N, li, rc,
                       rc_f);
                CHECKF(!memcmp(codes, want, (size_t)K * N) && !memcmp(scales, want_scales, (size_t)N * sizeof *scales),
                       "%s %dx%d layout %d: pack differs from pack of the dequantized floats", quant_type_name(t), K, N,
                       li);
            }
            free(w);
            free(f);
            free(codes);
            free(want);
            free(scales);
            free(want_scales);
        }
}

/* ---- devices ---- */

struct shape {
    int K, N;
};

/* Activations for M rows of K. */
static void make_act(int M, int K, int8_t *q, float *scales) {
    float *x = malloc((size_t)M * K * sizeof *x);
    for (int i = 0; i < M * K; i++) x[i] = test_gauss() * (1.0f + (float)(i / K % 5));
    CHECK(w8a8_quantize_act(x, M, K, K, q, scales) == 0);
    free(x);
}

/* The reference by hand on the cpu device's own codes (slot 0). */
static int naive_check(const int8_t *codes, const float *cs, int K, int N, int M, const int8_t *a, const float *rs,
                       const float *out, size_t stride) {
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++) {
            int64_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int64_t)a[(size_t)i * K + k] * codes[(size_t)n * K + k];
            float v = (float)(int32_t)acc * rs[i];
            v = v * cs[n];
            bad += memcmp(&v, &out[(size_t)i * stride + n], sizeof v) != 0;
        }
    return bad;
}

/* Runs one weight at each M on `d` and on the cpu reference `ref`; outputs
 * must match byte for byte, and columns past N must stay untouched. */
static void compare_devices(struct dev *ref, struct dev *d, enum qtype t, struct shape sh, const int *Ms, int n_m) {
    const char *name = dev_caps(d)->name;
    char *w = make_weight(t, sh.K, sh.N);
    int rc_ref = dev_pack(ref, 0, t, w, sh.K, sh.N), rc = dev_pack(d, 0, t, w, sh.K, sh.N);
    CHECKF(rc_ref == DEV_OK && rc == DEV_OK, "%s: pack %dx%d: %d %d (%s)", name, sh.K, sh.N, rc_ref, rc, moex_error());
    free(w);
    if (rc_ref != DEV_OK || rc != DEV_OK) return;
    const size_t stride = (size_t)sh.N + 5;
    for (int mi = 0; mi < n_m; mi++) {
        const int M = Ms[mi];
        int8_t *a = malloc((size_t)M * sh.K);
        float *rs = malloc((size_t)M * sizeof *rs);
        float *o_ref = malloc((size_t)M * stride * sizeof(float)), *o = malloc((size_t)M * stride * sizeof(float));
        make_act(M, sh.K, a, rs);
        for (size_t i = 0; i < (size_t)M * stride; i++) o_ref[i] = o[i] = -12345.0f;
        struct dev_exec_job job = {.slot = 0, .m = M, .act = a, .act_scale = rs, .out = o_ref, .out_stride = stride};
        CHECK(dev_run_host(ref, &job, 1) == DEV_OK);
        job.out = o;
        rc = dev_run_host(d, &job, 1);
        CHECKF(rc == DEV_OK, "%s: submit %dx%d M=%d: %s", name, sh.K, sh.N, M, moex_error());
        int diff = 0, touched = 0;
        for (int i = 0; i < M; i++) {
            diff += memcmp(o_ref + (size_t)i * stride, o + (size_t)i * stride, (size_t)sh.N * sizeof(float)) != 0;
            for (size_t c = (size_t)sh.N; c < stride; c++) touched += o[(size_t)i * stride + c] != -12345.0f;
        }
        CHECKF(diff == 0, "%s %s %dx%d M=%d: %d rows differ from cpu", name, quant_type_name(t), sh.K, sh.N, M, diff);
        CHECKF(touched == 0, "%s: %d values written past N", name, touched);
        free(a);
        free(rs);
        free(o_ref);
        free(o);
    }
}

/* The cpu reference against a plain triple loop over its packed codes. */
static void test_cpu_reference(struct threadpool *pool) {
    struct dev *d;
    CHECK(dev_open("cpu", &(struct dev_options){.pool = pool}, &d) == DEV_OK);
    const int K = 320, N = 48, M = 19;
    CHECK(dev_pool_alloc(d, 1, (int64_t)K * N, N) == DEV_OK);
    char *w = make_weight(QT_Q8_0, K, N);
    CHECK(dev_pack(d, 0, QT_Q8_0, w, K, N) == DEV_OK);
    int8_t *codes = malloc((size_t)K * N), *a = malloc((size_t)M * K);
    float *cs = malloc(N * sizeof *cs), *rs = malloc(M * sizeof *rs), *o = malloc((size_t)M * N * sizeof *o);
    CHECK(pack_matrix(NULL, PACK_PATH_GENERIC, QT_Q8_0, w, K, N, PACK_ROWS, codes, cs) == PACK_OK);
    make_act(M, K, a, rs);
    struct dev_exec_job job = {.slot = 0, .m = M, .act = a, .act_scale = rs, .out = o, .out_stride = N};
    CHECK(dev_run_host(d, &job, 1) == DEV_OK);
    CHECKF(naive_check(codes, cs, K, N, M, a, rs, o, N) == 0, "cpu device differs from a plain loop");
    free(w);
    free(codes);
    free(a);
    free(cs);
    free(rs);
    free(o);
    dev_close(d);
}

static struct dev *open_with_pool(const char *name, struct threadpool *pool, const char *sim, int64_t slot_values,
                                  int max_n) {
    struct dev *d = NULL;
    int rc = dev_open(name, &(struct dev_options){.pool = pool, .spec = sim}, &d);
    CHECKF(rc == DEV_OK, "open %s: %s", name, moex_error());
    if (rc != DEV_OK) return NULL;
    rc = dev_pool_alloc(d, 4, slot_values, max_n);
    CHECKF(rc == DEV_OK, "pool %s: %s", name, moex_error());
    return d;
}

static void test_backends_equal(struct threadpool *pool) {
    const int Ms[] = {1, 2, 7, 8, 16, 17, 31, 32, 33, 64, 100, 128, 255, 300};
    const int n_m = sizeof Ms / sizeof Ms[0];
    const struct shape qwen[] = {{2048, 768}, {768, 2048}};
    /* odd shapes: in every envelope (K % 64, N % 16) and outside AMX's */
    const struct shape odd_all[] = {{64, 16}, {192, 48}, {320, 80}};
    const struct shape odd_rows[] = {{96, 16}, {32, 112}, {100, 37}, {33, 1}};
    const int64_t slot_values = 2048 * 768;
    const bool amx_here = cpu_features()->amx_int8;
    const char *names[] = {"sim", "amx"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !amx_here) continue;
        struct dev *ref = open_with_pool("cpu", pool, NULL, slot_values, 2048);
        struct dev *d = open_with_pool(names[b], pool, NULL, slot_values, 2048);
        if (!ref || !d) {
            dev_close(ref);
            dev_close(d);
            continue;
        }
        for (int s = 0; s < 2; s++) compare_devices(ref, d, QT_Q4_K, qwen[s], Ms, n_m);
        const int few[] = {1, 5, 16, 40};
        for (int s = 0; s < 3; s++) compare_devices(ref, d, QT_Q8_0, odd_all[s], few, 4);
        compare_devices(ref, d, QT_F16, odd_all[1], few, 4);
        compare_devices(ref, d, QT_Q6_K, (struct shape){256, 32}, few, 4);
        compare_devices(ref, d, QT_Q5_0, (struct shape){128, 256}, few, 4);
        const struct dev_caps *c = dev_caps(d);
        for (int s = 0; s < 4; s++) {
            struct shape sh = odd_rows[s];
            bool fits = sh.K % c->k_multiple == 0 && sh.N % c->n_multiple == 0;
            char *w = make_weight(QT_F32, sh.K, sh.N);
            int rc = dev_pack(d, 1, QT_F32, w, sh.K, sh.N);
            free(w);
            if (fits) compare_devices(ref, d, QT_F32, sh, few, 4);
            else CHECKF(rc == DEV_E_SHAPE, "%s: %dx%d outside the envelope: %d", c->name, sh.K, sh.N, rc);
        }
        dev_close(ref);
        dev_close(d);
    }
    if (!amx_here) {
        struct dev *d = (struct dev *)1;
        int rc = dev_open("amx", NULL, &d);
        CHECKF(rc == DEV_E_UNAVAILABLE && d == NULL, "amx without AMX: %d", rc);
        /* which AMX the CPU lacks, or (other architectures) that it is not x86-64 */
        CHECKF(strstr(moex_error(), "amx") && (strstr(moex_error(), "AMX") || strstr(moex_error(), "x86-64")),
               "message: '%s'", moex_error());
    }
    /* cpu odd shapes the other devices refuse, against the plain loop */
    struct dev *ref = open_with_pool("cpu", NULL, NULL, 4096, 64);
    if (ref) {
        const int K = 33, N = 37, M = 3;
        float *wf = malloc((size_t)K * N * sizeof *wf);
        for (int i = 0; i < K * N; i++) wf[i] = test_gauss();
        CHECK(dev_pack(ref, 2, QT_F32, wf, K, N) == DEV_OK);
        int8_t *codes = malloc((size_t)K * N), a[M * 33];
        float cs[37], rs[M], o[M * 40];
        CHECK(pack_matrix(NULL, PACK_PATH_GENERIC, QT_F32, wf, K, N, PACK_ROWS, codes, cs) == PACK_OK);
        make_act(M, K, a, rs);
        struct dev_exec_job job = {.slot = 2, .m = M, .act = a, .act_scale = rs, .out = o, .out_stride = 40};
        CHECK(dev_run_host(ref, &job, 1) == DEV_OK);
        CHECK(naive_check(codes, cs, K, N, M, a, rs, o, 40) == 0);
        free(codes);
        free(wf);
        dev_close(ref);
    }
}

/* Several jobs in one submission equal the same jobs one by one; a pool of
 * threads equals the caller alone. */
static void test_batches(struct threadpool *pool) {
    const char *names[] = {"cpu", "sim", "amx"};
    for (int b = 0; b < 3; b++) {
        if (b == 2 && !cpu_features()->amx_int8) continue;
        struct dev *d = open_with_pool(names[b], pool, NULL, 512 * 256, 512);
        struct dev *serial = open_with_pool(names[b], NULL, NULL, 512 * 256, 512);
        if (!d || !serial) {
            dev_close(d);
            dev_close(serial);
            continue;
        }
        const struct shape shapes[4] = {{512, 256}, {256, 512}, {512, 128}, {128, 64}};
        for (int s = 0; s < 4; s++) {
            char *w = make_weight(QT_Q4_0, shapes[s].K, shapes[s].N);
            CHECK(dev_pack(d, s, QT_Q4_0, w, shapes[s].K, shapes[s].N) == DEV_OK);
            CHECK(dev_pack(serial, s, QT_Q4_0, w, shapes[s].K, shapes[s].N) == DEV_OK);
            free(w);
        }
        struct dev_exec_job jobs[6];
        int8_t *acts[6];
        float *scales[6], *outs[6], *outs1[6];
        const int slot_of[6] = {0, 1, 2, 3, 0, 2}, m_of[6] = {3, 40, 1, 17, 9, 64};
        for (int j = 0; j < 6; j++) {
            struct shape sh = shapes[slot_of[j]];
            acts[j] = malloc((size_t)m_of[j] * sh.K);
            scales[j] = malloc((size_t)m_of[j] * sizeof(float));
            outs[j] = calloc((size_t)m_of[j] * sh.N, sizeof(float));
            outs1[j] = calloc((size_t)m_of[j] * sh.N, sizeof(float));
            make_act(m_of[j], sh.K, acts[j], scales[j]);
            jobs[j] = (struct dev_exec_job){slot_of[j], m_of[j], acts[j], scales[j], outs[j], (size_t)sh.N};
        }
        CHECK(dev_run_host(d, jobs, 6) == DEV_OK);
        for (int j = 0; j < 6; j++) {
            struct dev_exec_job one = jobs[j];
            one.out = outs1[j];
            CHECK(dev_run_host(serial, &one, 1) == DEV_OK);
            CHECKF(!memcmp(outs[j], outs1[j], (size_t)m_of[j] * shapes[slot_of[j]].N * sizeof(float)),
                   "%s: job %d of a batch differs from alone", names[b], j);
            free(acts[j]);
            free(scales[j]);
            free(outs[j]);
            free(outs1[j]);
        }
        struct dev_counters c;
        dev_get_counters(d, &c);
        CHECK(c.submissions == 1 && c.jobs == 6 && c.rows == 3 + 40 + 1 + 17 + 9 + 64);
        CHECK(c.macs == 3ull * 512 * 256 + 40ull * 256 * 512 + 1ull * 512 * 128 + 17ull * 128 * 64 +
                            9ull * 512 * 256 + 64ull * 512 * 128);
        CHECK(c.packs == 4 && c.pack_bytes_read > 0 && c.pack_bytes_written >= 512 * 256);
        CHECK(c.busy_ns > 0 && c.pack_ns > 0 && c.resident_bytes >= 4ull * 512 * 256);
        dev_close(d);
        dev_close(serial);
    }
}

/* Every failure is a code, the counters record it, nothing crashes. */
/* What a host function on the stream saw. */
struct stream_probe {
    struct dev_ref out;
    float first;       /* out[0] read back on the stream, after the submission before it */
    pthread_t thread;  /* the thread that ran it */
    int calls;
    int fail;          /* return this (with a message) instead */
};

static int probe_fn(struct dev *d, void *arg) {
    struct stream_probe *p = arg;
    p->calls++;
    p->thread = pthread_self();
    if (p->fail) return moex_errorf("probe: failing on purpose"), p->fail;
    return dev_read(d, p->out, &p->first, sizeof p->first);
}

/* The stream: fences in order, host functions after the submissions queued
 * before them, on the device's own worker when it has no borrowed pool (on
 * the caller when it has one); a failure is reported by the wait that covers
 * it, and what was queued after it is skipped until then. */
static void test_stream(struct threadpool *pool) {
    for (int own = 0; own < 2; own++) {
        struct dev *d = NULL;
        CHECK(dev_open("cpu", &(struct dev_options){.pool = own ? NULL : pool}, &d) == DEV_OK);
        if (!d) continue;
        int buf;
        CHECK(dev_buffer_alloc(d, 4096, &buf) == DEV_OK && dev_pool_alloc(d, 1, 64 * 16, 16) == DEV_OK);
        float w[64 * 16];
        for (int i = 0; i < 64 * 16; i++) w[i] = (float)(i % 5) - 2.0f;
        CHECK(dev_pack(d, 0, QT_F32, w, 64, 16) == DEV_OK);
        int8_t a[64];
        for (int k = 0; k < 64; k++) a[k] = (int8_t)(k % 3);
        float rs = 0.5f, zero[16] = {0};
        struct dev_job job = {0, 1, {buf, 0}, {buf, 64}, {buf, 128}, 16};
        CHECK(dev_write(d, job.act, a, sizeof a) == DEV_OK && dev_write(d, job.act_scale, &rs, sizeof rs) == DEV_OK &&
              dev_write(d, job.out, zero, sizeof zero) == DEV_OK);
        struct stream_probe p = {.out = job.out};
        dev_fence f1 = 0, f2 = 0, f3 = 0;
        CHECK(dev_submit(d, &job, 1, &f1) == DEV_OK && dev_enqueue_host(d, probe_fn, &p, &f2) == DEV_OK);
        CHECK(f2 == f1 + 1 && dev_wait(d, f2) == DEV_OK && p.calls == 1);
        float out[16];
        CHECK(dev_read(d, job.out, out, sizeof out) == DEV_OK && out[0] != 0 && p.first == out[0]);
        CHECK(own ? !pthread_equal(p.thread, pthread_self()) : pthread_equal(p.thread, pthread_self()));
        /* A failing host step: the submission queued after it is skipped. */
        struct dev_counters c0, c1;
        dev_get_counters(d, &c0);
        p.fail = DEV_E_SUBMIT;
        CHECK(dev_enqueue_host(d, probe_fn, &p, &f1) == DEV_OK && dev_submit(d, &job, 1, &f2) == DEV_OK);
        struct stream_probe later = {.out = job.out};
        CHECK(dev_enqueue_host(d, probe_fn, &later, &f3) == DEV_OK);
        CHECK(dev_wait(d, f3) == DEV_E_SUBMIT && strstr(moex_error(), "failing on purpose"));
        dev_get_counters(d, &c1);
        CHECK(c1.submissions == c0.submissions && later.calls == 0);
        /* Reported once: the stream runs again. */
        CHECK(dev_wait(d, f3) == DEV_OK);
        CHECK(dev_run(d, &job, 1) == DEV_OK);
        dev_get_counters(d, &c1);
        CHECK(c1.submissions == c0.submissions + 1);
        dev_close(d);
    }
}

static void test_errors(void) {
    struct dev *d = (struct dev *)1;
    CHECK(dev_open("tpu", NULL, &d) == DEV_E_OPTION && d == NULL);
    CHECK(strstr(moex_error(), "tpu") != NULL);
    CHECK(dev_open("sim", &(struct dev_options){.spec = "rk3588,cores=abc"}, &d) == DEV_E_OPTION && d == NULL);
    CHECK(dev_open("sim", &(struct dev_options){.spec = "rk9999"}, &d) == DEV_E_OPTION);
    CHECK(dev_open("sim", &(struct dev_options){.spec = "rk3588,warp=3"}, &d) == DEV_E_OPTION);
    CHECK(dev_open("cpu", &(struct dev_options){.budget_bytes = 1 << 20, .n_threads = 2}, &d) == DEV_OK);
    int8_t a[64] = {1};
    float rs[1] = {1}, out[64];
    /* Device memory: a staging buffer counts in the budget, before the pool. */
    int buf = -1, none;
    CHECK(dev_buffer_alloc(d, 0, &none) == DEV_E_ARG);
    CHECK(dev_buffer_alloc(d, (1 << 20) + 1, &none) == DEV_E_BUDGET);
    CHECK(dev_buffer_alloc(d, 4096, &buf) == DEV_OK && buf == 0 && dev_buffer_bytes(d, 0) == 4096);
    struct dev_job job = {.slot = 0, .m = 1, .act = {buf, 0}, .act_scale = {buf, 64}, .out = {buf, 128}, .out_stride = 64};
    CHECK(dev_write(d, job.act, a, sizeof a) == DEV_OK && dev_write(d, job.act_scale, rs, sizeof rs) == DEV_OK);
    CHECK(dev_write(d, (struct dev_ref){buf, 4095}, a, 2) == DEV_E_ARG); /* past the end */
    CHECK(dev_write(d, (struct dev_ref){1, 0}, a, 1) == DEV_E_ARG);      /* no such buffer */
    CHECK(dev_read(d, (struct dev_ref){buf, 0}, NULL, 1) == DEV_E_ARG);
    float w[64 * 16];
    for (int i = 0; i < 64 * 16; i++) w[i] = (float)(i % 7) - 3.0f;
    dev_fence f = 0;
    CHECK(dev_submit(d, &job, 1, &f) == DEV_E_STATE);
    CHECK(dev_pack(d, 0, QT_F32, w, 64, 16) == DEV_E_STATE);
    CHECK(dev_pool_alloc(d, 1000, 1 << 20, 64) == DEV_E_BUDGET);
    CHECK(dev_pool_alloc(d, 2, 0, 16) == DEV_E_ARG);
    CHECK(dev_pool_alloc(d, 0, 64 * 64, 64) == DEV_OK);
    CHECK(dev_pool_slots(d) == (int)(((1 << 20) - 4096) / dev_slot_bytes(d, 64 * 64, 64)));
    CHECK(dev_pool_alloc(d, 1, 64 * 64, 64) == DEV_E_STATE);
    CHECK(dev_buffer_alloc(d, 4096, &none) == DEV_E_BUDGET); /* the pool took the rest */
    CHECK(dev_submit(d, &job, 1, &f) == DEV_OK && dev_wait(d, f) == DEV_E_STATE); /* slot empty when it runs */
    CHECK(dev_pack(d, -1, QT_F32, w, 64, 16) == DEV_E_ARG);
    CHECK(dev_pack(d, 1 << 20, QT_F32, w, 64, 16) == DEV_E_ARG);
    CHECK(dev_pack(d, 0, QT_F32, NULL, 64, 16) == DEV_E_ARG);
    CHECK(dev_pack(d, 0, QT_F32, w, 128, 48) == DEV_E_SHAPE);   /* more values than a slot */
    CHECK(dev_pack(d, 0, QT_F32, w, 16, 65) == DEV_E_SHAPE);    /* more channels than a slot */
    CHECK(dev_pack(d, 0, (enum qtype)5, w, 64, 16) == DEV_E_TYPE);
    CHECK(dev_pack(d, 0, QT_Q4_K, w, 64, 16) == DEV_E_TYPE);    /* K not a multiple of 256 */
    w[100] = NAN;
    CHECK(dev_pack(d, 0, QT_F32, w, 64, 16) == DEV_E_VALUE);
    int K, N;
    dev_slot_shape(d, 0, &K, &N);
    CHECK(K == 0 && N == 0);
    w[100] = 1.0f;
    CHECK(dev_pack(d, 0, QT_F32, w, 64, 16) == DEV_OK);
    dev_slot_shape(d, 0, &K, &N);
    CHECK(K == 64 && N == 16);
    CHECK(dev_submit(d, &job, 0, &f) == DEV_E_ARG);
    CHECK(dev_submit(d, NULL, 1, &f) == DEV_E_ARG);
    job.m = 0;
    CHECK(dev_submit(d, &job, 1, &f) == DEV_E_ARG);
    job.m = 1;
    job.out_stride = 8;
    CHECK(dev_run(d, &job, 1) == DEV_E_ARG);
    job.out_stride = 64;
    job.slot = 1;
    CHECK(dev_run(d, &job, 1) == DEV_E_STATE);
    job.slot = 0;
    job.out.offset = 4096 - 16 * 4 + 4; /* the output's last column past the buffer */
    CHECK(dev_run(d, &job, 1) == DEV_E_ARG);
    job.out.offset = 130; /* misaligned floats */
    CHECK(dev_submit(d, &job, 1, &f) == DEV_E_ARG);
    job.out.offset = 128;
    CHECK(dev_submit(d, &job, 1, &f) == DEV_OK && f == 5);
    CHECK(dev_wait(d, f) == DEV_OK && dev_wait(d, f + 1) == DEV_E_ARG);
    CHECK(dev_read(d, job.out, out, 16 * sizeof(float)) == DEV_OK);
    float ref = 0;
    for (int k = 0; k < 64; k++) ref += (float)a[k] * w[k]; /* a is one nonzero value: exact */
    CHECKF(fabsf(out[0] - ref) <= 0.05f * fabsf(ref) + 0.05f, "out %g, expected about %g", (double)out[0], (double)ref);
    struct dev_counters c;
    dev_get_counters(d, &c);
    CHECKF(c.failed_submissions == 9 && c.submissions == 1, "%llu %llu", (unsigned long long)c.failed_submissions,
           (unsigned long long)c.submissions);
    CHECKF(c.failed_packs == 9 && c.packs == 1, "%llu %llu", (unsigned long long)c.failed_packs, (unsigned long long)c.packs);
    CHECK(c.staging_bytes == 4096 && c.resident_bytes == 4096 + (uint64_t)dev_pool_slots(d) * dev_slot_bytes(d, 64 * 64, 64));
    CHECK(c.resident_bytes <= (1 << 20));
    CHECK(dev_estimate_ns(d, &job, 1) > 0);
    for (int s = DEV_E_OPTION; s <= DEV_OK; s++) CHECK(strcmp(dev_status_string(s), "unknown device status") != 0);
    dev_close(d);
    dev_close(NULL);
}

int main(void) {
    test_seed(0x1234567887654321ull);
    struct threadpool *pool = threadpool_new(2, false);
    CHECK(pool != NULL);
    test_rounding_rule();
    test_pack_rows();
    test_pack_errors();
    test_pack_fused_edges();
    test_pack_matrix(pool);
    test_pack_b32_experts(pool);
    test_cpu_reference(pool);
    test_backends_equal(pool);
    test_batches(pool);
    test_errors();
    test_stream(pool);
    threadpool_free(pool);
    return test_finish();
}
