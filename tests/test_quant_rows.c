/* A matmul's result for one (weight row, activation row) pair does not
 * depend on how many rows share the call: for every weight type and every
 * ISA this machine runs (the kernels quant_init(isa) dispatches), the gemm
 * tile gives the bits of the dot product decode takes, for 1 to 9 weight
 * rows (short tiles) by 1 to 5 activation rows, and the interleaved
 * kernels (Q4_K, Q6_K) give for one activation row the bits they give it
 * among several. This is what makes a prompt's logits the same whatever its
 * split into forward passes (and whatever the number of tokens an expert
 * gets in a pass). */
#include "harness.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const enum qtype types[] = { QT_F32, QT_F16, QT_BF16, QT_Q4_0, QT_Q4_1, QT_Q5_0,
                                    QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K };
enum { N_TYPES = sizeof types / sizeof types[0], MAX_ROWS = 16, MAX_ACTS = 5 };

static float gauss(void) {
    double u1 = ((test_rand() >> 11) + 1) * 0x1p-53, u2 = (test_rand() >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

struct rows {
    size_t w_stride, a_stride;
    char *w, *a;   /* MAX_ROWS weight rows, MAX_ACTS activation rows */
};

static struct rows make_rows(enum qtype t, int n) {
    const struct qtype_traits *tr = quant_traits(t);
    struct rows r = { quant_row_size(t, n), quant_row_size(tr->vec_dot_type, n), NULL, NULL };
    r.w = malloc(r.w_stride * MAX_ROWS);
    r.a = malloc(r.a_stride * MAX_ACTS);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < MAX_ROWS; i++) {
        for (int k = 0; k < n; k++) x[k] = gauss();
        tr->from_float(x, r.w + (size_t)i * r.w_stride, n);
    }
    for (int j = 0; j < MAX_ACTS; j++) {
        for (int k = 0; k < n; k++) x[k] = 3.0f * gauss();
        quant_quantize_act(tr->vec_dot_type, x, r.a + (size_t)j * r.a_stride, n);
    }
    free(x);
    return r;
}

static void check_type(enum isa isa, enum qtype t, int n) {
    const struct qtype_traits *tr = quant_traits(t);
    CHECK(tr && tr->vec_dot && tr->gemm_tile);
    if (!tr || !tr->vec_dot || !tr->gemm_tile) return;
    struct rows r = make_rows(t, n);
    float got[MAX_ACTS * MAX_ROWS], want[MAX_ACTS * MAX_ROWS];
    int bad = 0;
    for (int c = 0; c < MAX_ACTS; c++)
        for (int i = 0; i < MAX_ROWS; i++)
            tr->vec_dot(n, &want[c * MAX_ROWS + i], r.w + (size_t)i * r.w_stride, r.a + (size_t)c * r.a_stride);
    for (int rows = 1; rows <= 9; rows++)
        for (int acts = 1; acts <= MAX_ACTS; acts++) {
            tr->gemm_tile(n, r.w, r.w_stride, rows, r.a, r.a_stride, acts, got, MAX_ROWS);
            for (int c = 0; c < acts; c++) bad += memcmp(&got[c * MAX_ROWS], &want[c * MAX_ROWS], sizeof(float) * rows) != 0;
        }
    CHECKF(bad == 0, "%s %s n=%d: %d tiles differ from the dot products", isa_name(isa), tr->name, n, bad);
    if (tr->gemm_r16) {
        char *packed = malloc(r.w_stride * MAX_ROWS);
        CHECK(quant_r16_pack(t, r.w, r.w_stride, MAX_ROWS, n, packed) == 0);
        tr->gemm_r16(n, packed, r.w_stride, MAX_ROWS, r.a, r.a_stride, MAX_ACTS, want, MAX_ROWS);
        bad = 0;
        for (int c = 0; c < MAX_ACTS; c++) {
            tr->gemm_r16(n, packed, r.w_stride, MAX_ROWS, r.a + (size_t)c * r.a_stride, r.a_stride, 1, got, MAX_ROWS);
            bad += memcmp(got, &want[c * MAX_ROWS], sizeof(float) * MAX_ROWS) != 0;
        }
        CHECKF(bad == 0, "%s %s n=%d interleaved: %d activation rows alone differ from among %d", isa_name(isa),
               tr->name, n, bad, MAX_ACTS);
        free(packed);
    }
    free(r.w);
    free(r.a);
}

int main(void) {
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        if (!isa_available((enum isa)isa)) continue;
        quant_init((enum isa)isa);
        printf("%s\n", isa_name(quant_active_isa()));
        for (int t = 0; t < N_TYPES; t++) {
            check_type((enum isa)isa, types[t], 256);
            check_type((enum isa)isa, types[t], 2048);
        }
    }
    quant_init(ISA_COUNT);
    return test_finish();
}
