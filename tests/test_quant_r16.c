/* Q4_K and Q6_K rows interleaved by 16 (quant_r16_pack): the scalar reference kernel
 * agrees with the plain rows' dot products (the layout holds the same
 * numbers), and every kernel this CPU can run (each ISA's, and AVX-VNNI's
 * beside AVX2's) equals the reference bit for bit, for every tile width and
 * short tail; dispatch picks the active ISA's kernel, AVX-VNNI's only when
 * the cap is above avx2; the packer refuses what it cannot lay out. */
#include "harness.h"
#include "core/cpu.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* kind 0: quantized gaussians; kind 1: random bytes with sane fp16 scales
 * (every nibble and 6-bit scale pattern). */
static void make_rows(enum qtype t, int rows, int n, uint8_t *dst, int kind) {
    size_t row_bytes = quant_row_size(t, n);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < rows; r++) {
        uint8_t *row = dst + (size_t)r * row_bytes;
        for (int i = 0; i < n; i++) x[i] = 0.05f * test_gauss();
        quant_traits(t)->from_float(x, row, n);
        if (kind != 1) continue;
        for (size_t i = 0; i < row_bytes; i++) row[i] = (uint8_t)test_rand();
        for (int b = 0; b < n / QK_K; b++) {
            if (t == QT_Q6_K) {
                ((struct block_q6_K *)row + b)->d = f32_to_fp16((float)(test_rand() % 1000) * 1e-5f);
                continue;
            }
            struct block_q4_K *blk = (struct block_q4_K *)row + b;
            blk->d = f32_to_fp16((float)(test_rand() % 1000) * 1e-5f);
            blk->dmin = f32_to_fp16((float)(test_rand() % 1000) * 1e-5f);
        }
    }
    free(x);
}

static void make_acts(int cols, int n, uint8_t *dst, size_t stride) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int c = 0; c < cols; c++) {
        float sigma = 0.1f + (float)(test_rand() % 300) * 0.01f;
        for (int i = 0; i < n; i++) x[i] = sigma * test_gauss();
        if (c == 1) for (int i = 0; i < n && i < 300; i++) x[i] = i % 97 == 5 ? 40.0f : 0.0f;
        quant_quantize_act(QT_Q8_K, x, dst + (size_t)c * stride, n);
    }
    free(x);
}

/* The AVX-VNNI kernel of t where this CPU has AVX-VNNI, else NULL. */
static gemm_tile_fn avxvnni_kernel(enum qtype t) {
#if defined(__x86_64__)
    if (isa_available(ISA_AVX2) && cpu_features()->avxvnni) return t == QT_Q4_K ? gemm_q4_K_r16_avxvnni : gemm_q6_K_r16_avxvnni;
#endif
    (void)t;
    return NULL;
}

enum { N_KERNELS = ISA_COUNT + 1 }; /* every ISA's, then AVX-VNNI's */

static void check_type(enum qtype type) {
    const struct qtype_kernels *ref = quant_kernels(type, ISA_SCALAR);
    const gemm_tile_fn ref_r16 = quant_r16_kernel(type, ISA_SCALAR);
    CHECK(ref && ref_r16);
    if (!ref || !ref_r16) return;
    const int ns[] = {256, 768, 2048};
    /* up to two of the 256-bit kernels' unpacked panels (32 rows) and a streamed tail */
    const int widths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17, 33, 40, 47};
    gemm_tile_fn kernels[N_KERNELS];
    const char *names[N_KERNELS];
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        kernels[isa] = quant_r16_kernel(type, (enum isa)isa);
        names[isa] = isa_name((enum isa)isa);
    }
    kernels[ISA_COUNT] = avxvnni_kernel(type);
    names[ISA_COUNT] = "avxvnni";
    int exact_checks[N_KERNELS] = {0};
    for (int ni = 0; ni < 3; ni++)
        for (int kind = 0; kind < 2; kind++) {
            const int n = ns[ni], rows = 3 * QUANT_R16_ROWS, max_cols = 47;
            const size_t row_bytes = quant_row_size(type, n), act_bytes = quant_row_size(QT_Q8_K, n);
            uint8_t *w = malloc(row_bytes * rows), *packed = malloc(row_bytes * rows);
            uint8_t *a = malloc(act_bytes * max_cols);
            float *want = malloc(sizeof(float) * rows * max_cols), *got = malloc(sizeof(float) * rows * max_cols);
            make_rows(type, rows, n, w, kind);
            make_acts(max_cols, n, a, act_bytes);
            CHECK(quant_r16_pack(type, w, row_bytes, rows, n, packed) == 0);
            /* the layout holds the plain rows' numbers */
            ref_r16(n, packed, row_bytes, rows, a, act_bytes, max_cols, want, rows);
            for (int c = 0; c < max_cols; c++)
                for (int r = 0; r < rows; r++) {
                    float plain;
                    ref->vec_dot(n, &plain, w + (size_t)r * row_bytes, a + (size_t)c * act_bytes);
                    float dw[2048], da[2048];
                    ref->to_float(w + (size_t)r * row_bytes, dw, n);
                    quant_kernels(QT_Q8_K, ISA_SCALAR)->to_float(a + (size_t)c * act_bytes, da, n);
                    double scale = 0;
                    for (int i = 0; i < n; i++) scale += fabs((double)dw[i] * da[i]);
                    CHECKF(fabs((double)want[(size_t)c * rows + r] - plain) <= 1e-5 * scale + 1e-30,
                           "%s n=%d kind %d row %d col %d: %.9g vs plain %.9g", quant_type_name(type), n, kind, r, c,
                           want[(size_t)c * rows + r], plain);
                }
            /* every kernel equals the reference, for each tile width */
            for (int ki = 0; ki < N_KERNELS; ki++) {
                const gemm_tile_fn k = kernels[ki];
                if (!k) continue;
                for (int wi = 0; wi < (int)(sizeof widths / sizeof widths[0]); wi++) {
                    const int cols = widths[wi];
                    memset(got, 0xff, sizeof(float) * rows * max_cols);
                    /* one group past the first: w_stride is the plain row's bytes */
                    k(n, packed + QUANT_R16_ROWS * row_bytes, row_bytes, rows - QUANT_R16_ROWS, a, act_bytes,
                                cols, got, rows);
                    for (int c = 0; c < cols; c++)
                        CHECKF(!memcmp(got + (size_t)c * rows, want + (size_t)c * rows + QUANT_R16_ROWS,
                                       sizeof(float) * (rows - QUANT_R16_ROWS)),
                               "%s %s n=%d kind %d cols %d: col %d differs", quant_type_name(type),
                               names[ki], n, kind, cols, c);
                    exact_checks[ki]++;
                }
            }
            free(w); free(packed); free(a); free(want); free(got);
        }
    for (int ki = 0; ki < N_KERNELS; ki++)
        if (exact_checks[ki]) printf("%s r16 %-7s %d tiles equal to the reference\n", quant_type_name(type), names[ki],
                                     exact_checks[ki]);
    /* every SIMD ISA this CPU has comes with its kernel */
    for (int isa = ISA_AVX2; isa < ISA_COUNT; isa++)
        if (isa_available((enum isa)isa)) CHECKF(kernels[isa] != NULL, "%s: no %s r16 kernel", quant_type_name(type),
                                                 names[isa]);
    CHECK(!!kernels[ISA_COUNT] == (isa_available(ISA_AVX2) && cpu_features()->avxvnni));
}

/* The dispatched kernel is a SIMD one of the active ISA (AVX-VNNI's for
 * AVX2 where the CPU has it, unless capped at avx2), or none. */
static void check_dispatch(enum qtype type) {
    quant_init(ISA_COUNT);
    const struct qtype_traits *tr = quant_traits(type);
    const enum isa active = quant_active_isa();
    gemm_tile_fn want = active == ISA_SCALAR ? NULL : quant_r16_kernel(type, active);
    if (active == ISA_AVX2 && avxvnni_kernel(type)) want = avxvnni_kernel(type);
    CHECKF(tr->gemm_r16 == want, "%s: the dispatched r16 kernel is not %s's", quant_type_name(type), isa_name(active));
    const gemm_tile_fn uncapped = tr->gemm_r16;
    if (isa_available(ISA_AVX2)) {
        quant_init(ISA_AVX2);
        CHECK(quant_active_isa() == ISA_AVX2);
        CHECKF(quant_traits(type)->gemm_r16 == quant_r16_kernel(type, ISA_AVX2),
               "%s: the avx2 cap does not select the AVX2 r16 kernel", quant_type_name(type));
        quant_init(ISA_COUNT);
    }
    CHECK(quant_traits(type)->gemm_r16 == uncapped && quant_active_isa() == active);
}

int main(void) {
    check_type(QT_Q4_K);
    check_type(QT_Q6_K);
    check_dispatch(QT_Q4_K);
    check_dispatch(QT_Q6_K);
    /* refusals: other types, rows not a multiple of 16, columns not of 256 */
    uint8_t buf[16 * 176];
    CHECK(quant_r16_pack(QT_Q5_K, buf, 176, 16, 256, buf) == -1);
    CHECK(quant_r16_pack(QT_Q4_K, buf, 144, 15, 256, buf) == -1);
    CHECK(quant_r16_pack(QT_Q4_K, buf, 144, 16, 200, buf) == -1);
    return test_finish();
}
