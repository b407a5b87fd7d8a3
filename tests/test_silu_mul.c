/* silu_mul_row (the experts' silu(gate) * up): every ISA's kernel gives the
 * bits of g / (1 + expf(-g)) * u with this libm's expf, over a sweep of
 * every 61st float between -100 and 100 (past the 88 where expf's special
 * cases begin), the special values, and row lengths with short tails. */
#include "harness.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

enum { ROW = 4099 }; /* not a multiple of any vector width */

/* Checks one row of gates against the expression; returns the mismatches. */
static long check_row(const float *gate, const float *up, int n) {
    float *g = malloc(sizeof(float) * (size_t)n);
    memcpy(g, gate, sizeof(float) * (size_t)n);
    silu_mul_row(g, up, n);
    long bad = 0;
    for (int i = 0; i < n; i++) {
        const float want = gate[i] / (1.0f + expf(-gate[i])) * up[i];
        /* NaN in, NaN out: any NaN */
        const bool same = isnan(want) ? isnan(g[i]) : to_bits(g[i]) == to_bits(want);
        if (!same && bad++ < 5)
            fprintf(stderr, "silu_mul(%a) * %a = %a, want %a (%s)\n", gate[i], up[i], g[i], want,
                    isa_name(quant_active_isa()));
    }
    free(g);
    return bad;
}

static void check_isa(void) {
    float *gate = malloc(sizeof(float) * ROW), *up = malloc(sizeof(float) * ROW);
    long bad = 0, n_checked = 0;
    int fill = 0;
    /* positive and negative floats up to 100 (bits 0x42c80000), every 61st */
    for (uint64_t b = 0; b <= 0x42c80000u; b += 61)
        for (int sign = 0; sign < 2; sign++) {
            gate[fill] = from_bits((uint32_t)b | (uint32_t)sign << 31);
            up[fill] = 1.0f + (float)(fill % 7) * 0.25f;
            if (++fill == ROW) {
                bad += check_row(gate, up, fill);
                n_checked += fill;
                fill = 0;
            }
        }
    const float special[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.0f, -88.0f, 88.72f, -88.72f, 89.0f, -89.0f,
                              103.0f, -103.0f, 103.5f, -103.5f, 104.0f, -104.0f, 1e-45f, -1e-45f, 1e30f, -1e30f };
    for (int i = 0; i < (int)(sizeof special / sizeof special[0]); i++) {
        gate[fill] = special[i];
        up[fill++] = 0.5f;
    }
    bad += check_row(gate, up, fill);
    n_checked += fill;
    /* short rows: every tail length */
    for (int n = 0; n < 40; n++) bad += check_row(gate + 1000, up + 1000, n);
    CHECKF(bad == 0, "%s: %ld of %ld values differ from the expression", isa_name(quant_active_isa()), bad, n_checked);
    CHECK(n_checked > 2000000);
    free(gate);
    free(up);
}

int main(void) {
    for (int isa = 0; isa < ISA_COUNT; isa++) {
        if (!isa_available((enum isa)isa)) continue;
        quant_init((enum isa)isa);
        CHECK(quant_active_isa() == (enum isa)isa);
        check_isa();
    }
    quant_init(ISA_COUNT);
    return test_finish();
}
