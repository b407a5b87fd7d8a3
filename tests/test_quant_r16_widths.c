/* The r16 kernels at every activation row count from 1 to 48 (every tile
 * width up to 16 and the panels' tails: 17 = 16 + 1, 37 = 16 + 16 + 5, ...)
 * equal the scalar reference bit for bit, on every ISA this CPU runs, at
 * the experts' shapes (n = 768 and 2048). */
#include "harness.h"
#include "quant/quant.h"
#include "quant/quant_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 2 * QUANT_R16_ROWS, MAX_M = 48 };

static void check(enum qtype t, int n) {
    const size_t rb = quant_row_size(t, n), ab = quant_row_size(QT_Q8_K, n);
    uint8_t *w = malloc(rb * ROWS), *packed = malloc(rb * ROWS), *a = malloc(ab * MAX_M);
    float *x = malloc(sizeof(float) * (size_t)n);
    float *want = malloc(sizeof(float) * ROWS * MAX_M), *got = malloc(sizeof(float) * ROWS * MAX_M);
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < n; i++) x[i] = test_symmetric() * (1.0f + (float)(r % 5));
        quant_traits(t)->from_float(x, w + (size_t)r * rb, n);
    }
    for (int c = 0; c < MAX_M; c++) {
        for (int i = 0; i < n; i++) x[i] = test_symmetric() * 4.0f;
        quant_quantize_act(QT_Q8_K, x, a + (size_t)c * ab, n);
    }
    CHECK(quant_r16_pack(t, w, rb, ROWS, n, packed) == 0);
    const gemm_tile_fn ref = quant_r16_kernel(t, ISA_SCALAR);
    CHECK(ref != NULL);
    if (ref) ref(n, packed, rb, ROWS, a, ab, MAX_M, want, ROWS);
    for (int isa = ISA_SCALAR + 1; isa < ISA_COUNT && ref; isa++) {
        const gemm_tile_fn k = quant_r16_kernel(t, (enum isa)isa);
        if (!k) continue;
        int bad = 0;
        for (int m = 1; m <= MAX_M; m++) {
            memset(got, 0xff, sizeof(float) * ROWS * MAX_M);
            k(n, packed, rb, ROWS, a, ab, m, got, ROWS);
            if (memcmp(got, want, sizeof(float) * ROWS * (size_t)m) && bad++ < 3)
                fprintf(stderr, "%s %s n=%d: %d rows differ from the reference\n", quant_type_name(t),
                        isa_name((enum isa)isa), n, m);
            /* nothing written past the m rows */
            for (int i = ROWS * m; i < ROWS * MAX_M && !bad; i++) {
                uint32_t v;
                memcpy(&v, &got[i], 4);
                if (v != 0xffffffffu) bad++;
            }
        }
        CHECKF(bad == 0, "%s %s n=%d: %d row counts differ", quant_type_name(t), isa_name((enum isa)isa), n, bad);
    }
    free(w); free(packed); free(a); free(x); free(want); free(got);
}

int main(void) {
    const enum qtype types[] = { QT_Q4_K, QT_Q6_K };
    for (int ti = 0; ti < 2; ti++) {
        check(types[ti], 768);
        check(types[ti], 2048);
    }
    return test_finish();
}
