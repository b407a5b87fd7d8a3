/* moex_embed on tiny synthetic models of each architecture: unit length,
 * the same vector whatever the batch size splits the text into, the context
 * left empty (a later eval gives a fresh context's logits), clean errors. */
#include "harness.h"
#include "moex_tools.h"
#include "synth/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static moex_context *context(moex_model *m, int n_batch) {
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = 64;
    cp.n_batch = n_batch;
    return moex_context_new(m, &cp);
}

static void test_preset(const char *preset) {
    moex_model *m = test_synth_model(preset, "embed");
    CHECKF(m != NULL, "%s: %s", preset, moex_last_error());
    if (!m) return;
    int D = moex_model_n_embd(m), V = moex_model_n_vocab(m);
    CHECK(D > 0);
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = (int32_t)((i * 37 + 5) % V);
    float *a = malloc(sizeof *a * (size_t)D), *b = malloc(sizeof *b * (size_t)D), *c3 = malloc(sizeof *c3 * (size_t)D);
    moex_context *c = context(m, 512), *small = context(m, 3), *fresh = context(m, 512);
    CHECK(c && small && fresh && a && b && c3);
    CHECKF(moex_embed(c, ids, 20, a) == 0, "%s: %s", preset, moex_last_error());
    double norm = 0;
    for (int d = 0; d < D; d++) norm += (double)a[d] * a[d];
    CHECKF(fabs(norm - 1) < 1e-5, "%s: |v|^2 = %g", preset, norm);
    CHECK(moex_n_past(c) == 0);
    CHECK(moex_embed(c, ids, 20, b) == 0 && !memcmp(a, b, sizeof *a * (size_t)D));
    /* in passes of 3 tokens: the same mean (each pass's rows are summed) */
    CHECK(moex_embed(small, ids, 20, c3) == 0);
    double diff = 0;
    for (int d = 0; d < D; d++) diff = fmax(diff, fabs(a[d] - c3[d]));
    CHECKF(diff < 1e-3, "%s: batch 3 vs 512 differ by %g", preset, diff);
    /* a different text, a different vector */
    ids[0] = (ids[0] + 1) % V;
    CHECK(moex_embed(c, ids, 20, b) == 0 && memcmp(a, b, sizeof *a * (size_t)D));
    /* the context is empty after: an eval gives a fresh context's logits */
    CHECK(moex_eval(c, ids, 5) == 0 && moex_eval(fresh, ids, 5) == 0);
    CHECK(!memcmp(moex_logits(c), moex_logits(fresh), sizeof(float) * (size_t)V));
    /* errors */
    int32_t many[65] = { 0 };
    CHECK(moex_embed(c, many, 65, a) == -1 && strstr(moex_last_error(), "context"));
    int32_t bad[2] = { 1, V };
    CHECK(moex_embed(c, bad, 2, a) == -1);
    CHECK(moex_embed(c, ids, 0, a) == -1 && moex_embed(NULL, ids, 1, a) == -1);
    CHECK(moex_embed(c, ids, 3, a) == 0); /* usable after the errors */
    free(a);
    free(b);
    free(c3);
    moex_context_free(c);
    moex_context_free(small);
    moex_context_free(fresh);
    moex_model_free(m);
}

int main(void) {
    test_preset("tiny");
    test_preset("qwen35-tiny");
    test_preset("lfm2-tiny");
    return test_finish();
}
