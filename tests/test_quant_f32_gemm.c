/* F32 matrices (the routers): every ISA's gemm tile gives, for each pair of
 * rows, the bits of that ISA's dot product (the sums decode takes), for
 * block edges in both directions and lengths with and without a tail
 * (the kernels each ISA cap dispatches). */
#include "harness.h"
#include "quant/quant.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the kernels quant_init(isa) dispatched */
static void check(enum isa isa, int n, int rows, int acts) {
    const vec_dot_fn dot = quant_traits(QT_F32)->vec_dot;
    const gemm_tile_fn gemm = quant_traits(QT_F32)->gemm_tile;
    CHECK(dot && gemm);
    if (!dot || !gemm) return;
    const size_t w_stride = sizeof(float) * (size_t)(n + 3), a_stride = sizeof(float) * (size_t)(n + 5);
    float *w = malloc(w_stride * rows), *a = malloc(a_stride * acts);
    float *got = malloc(sizeof(float) * rows * acts), *want = malloc(sizeof(float) * rows * acts);
    for (size_t i = 0; i < w_stride / 4 * rows; i++) w[i] = test_symmetric();
    for (size_t i = 0; i < a_stride / 4 * acts; i++) a[i] = test_symmetric();
    gemm(n, w, w_stride, rows, a, a_stride, acts, got, (size_t)rows);
    for (int c = 0; c < acts; c++)
        for (int r = 0; r < rows; r++)
            dot(n, &want[(size_t)c * rows + r], (const char *)w + r * w_stride, (const char *)a + c * a_stride);
    CHECKF(!memcmp(got, want, sizeof(float) * rows * acts), "%s n=%d %dx%d: the gemm tile differs from the dot product",
           isa_name(isa), n, rows, acts);
    free(w); free(a); free(got); free(want);
}

int main(void) {
    const int ns[] = { 32, 64, 2048, 40, 2049 };
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        if (!isa_available((enum isa)isa)) continue;
        quant_init((enum isa)isa);
        for (int ni = 0; ni < 5; ni++)
            for (int rows = 1; rows <= 9; rows++)
                for (int acts = 1; acts <= 5; acts++) check((enum isa)isa, ns[ni], rows, acts);
    }
    quant_init(ISA_COUNT);
    return test_finish();
}
