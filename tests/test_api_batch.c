/* The public API's multi-sequence contexts on tiny synthetic models of each
 * architecture: three prompts of different lengths evaluated in one batch,
 * then one decode batch per step with a token of every sequence, sampled
 * per sequence, give each sequence the tokens moex_generate gives it alone
 * with the same seed (F16 weights: bit-for-bit logits, so the same tokens
 * even at temperature 1); prefix reuse and truncation per sequence; errors. */
#include "moex_tools.h"

#include "harness.h"
#include "synth/synth.h"

#include <stdlib.h>
#include <string.h>

enum { N_SEQ = 3, N_GEN = 12 };

struct ids { int32_t v[64]; int n; };

static int collect(void *user, int32_t id, const char *text, size_t len) {
    (void)text; (void)len;
    struct ids *out = user;
    if (id >= 0 && out->n < 64) out->v[out->n++] = id;
    return 0;
}

static void sampler_settings(struct moex_sampler_params *sp, int seq) {
    moex_sampler_params_default(sp);
    sp->temperature = seq == 1 ? 0.0f : 1.0f;   /* one greedy, two sampled */
    sp->seed = 100 + (uint64_t)seq;
}

static void check_model(const char *preset) {
    moex_model *m = test_synth_model(preset, "batch");
    CHECKF(m != NULL, "%s: %s", preset, moex_last_error());
    if (!m) return;
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = 128;
    int32_t prompt[N_SEQ][24];
    int n_prompt[N_SEQ] = { 5, 17, 9 };
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < n_prompt[s]; i++) prompt[s][i] = (int32_t)(3 + (s * 97 + i * 31) % 200);

    /* Alone: moex_generate, each sequence in a context of its own. */
    struct ids want[N_SEQ] = { 0 };
    for (int s = 0; s < N_SEQ; s++) {
        moex_context *c = moex_context_new(m, &cp);
        struct moex_sampler_params sp;
        sampler_settings(&sp, s);
        moex_sampler *smp = moex_sampler_new(m, &sp);
        struct moex_generate_params gp = { .max_tokens = N_GEN, .ignore_eog = true, .on_token = collect, .user = &want[s] };
        struct moex_generate_result r;
        CHECK(c && smp && moex_generate(c, smp, prompt[s], n_prompt[s], &gp, &r) == 0 && want[s].n == N_GEN);
        moex_sampler_free(smp);
        moex_context_free(c);
    }

    /* Batched: the three prompts interleaved in one batch, then a decode
     * batch per step. */
    moex_context *c = moex_context_new_seqs(m, &cp, N_SEQ);
    CHECKF(c != NULL, "%s", moex_last_error());
    if (!c) { moex_model_free(m); return; }
    CHECK(moex_n_seq(c) == N_SEQ && moex_seq_logits(c, 1) == NULL && moex_seq_logits(c, N_SEQ) == NULL);
    moex_sampler *smp[N_SEQ];
    int32_t batch[64], seqs[64];
    int n = 0;
    for (int i = 0; i < 24; i++)
        for (int s = 0; s < N_SEQ; s++)
            if (i < n_prompt[s]) { batch[n] = prompt[s][i]; seqs[n++] = s; }
    for (int s = 0; s < N_SEQ; s++) {
        struct moex_sampler_params sp;
        sampler_settings(&sp, s);
        smp[s] = moex_sampler_new(m, &sp);
        for (int i = 0; i < n_prompt[s]; i++) moex_sampler_accept(smp[s], prompt[s][i]);
    }
    CHECK(moex_eval_batch(c, batch, seqs, n) == 0);
    struct moex_phase_counters prompt_pre, prompt_dec, pre, dec;
    moex_context_phase_counters(c, MOEX_PHASE_PREFILL, &prompt_pre);
    moex_context_phase_counters(c, MOEX_PHASE_DECODE, &prompt_dec);
    CHECKF(prompt_pre.batches > 0 && prompt_dec.batches == 0, "%s: the prompts counted as decode", preset);
    struct ids got[N_SEQ] = { 0 };
    for (int step = 0; step < N_GEN; step++) {
        n = 0;
        for (int s = N_SEQ - 1; s >= 0; s--) { /* another order than the prompts' */
            int32_t id = moex_sample_seq(smp[s], c, s);
            got[s].v[got[s].n++] = id;
            batch[n] = id;
            seqs[n++] = s;
        }
        if (step + 1 < N_GEN) CHECK(moex_eval_batch(c, batch, seqs, n) == 0);
    }
    /* A step of one token per sequence is decode, however many sequences it holds. */
    moex_context_phase_counters(c, MOEX_PHASE_PREFILL, &pre);
    moex_context_phase_counters(c, MOEX_PHASE_DECODE, &dec);
    CHECKF(pre.batches == prompt_pre.batches && pre.rows_cpu + pre.rows_device == prompt_pre.rows_cpu +
           prompt_pre.rows_device, "%s: batched decode steps counted as prefill", preset);
    CHECKF(dec.batches > 0 && dec.batches % (N_GEN - 1) == 0 && dec.rows_cpu + dec.rows_device > 0,
           "%s: %llu decode batches for %d steps", preset, (unsigned long long)dec.batches, N_GEN - 1);
    for (int s = 0; s < N_SEQ; s++) {
        CHECKF(got[s].n == want[s].n && !memcmp(got[s].v, want[s].v, sizeof(int32_t) * (size_t)want[s].n),
               "%s: sequence %d: batched tokens differ from moex_generate alone", preset, s);
        CHECK(moex_seq_n_past(c, s) == n_prompt[s] + N_GEN - 1);
    }
    /* Prefix reuse and truncation per sequence. */
    CHECK(moex_seq_shared_prefix(c, 1, prompt[1], n_prompt[1]) == n_prompt[1]);
    CHECK(moex_seq_shared_prefix(c, 2, prompt[1], n_prompt[1]) == 0);
    moex_seq_truncate(c, 1, 4);
    CHECK(moex_seq_n_past(c, 1) == 4 && moex_seq_logits(c, 1) == NULL);
    CHECK(moex_seq_n_past(c, 0) == n_prompt[0] + N_GEN - 1 && moex_seq_logits(c, 0) != NULL);
    CHECK(moex_seq_shared_prefix(c, 1, prompt[1], n_prompt[1]) == 4);
    /* Errors: an unknown sequence; a token out of range keeps none of the
     * batch (the sequences hold what they held) and leaves no logits. */
    int32_t tok = 1, bad = N_SEQ;
    CHECK(moex_eval_batch(c, &tok, &bad, 1) == -1 && strstr(moex_last_error(), "sequence"));
    int32_t toks[2] = { 1, moex_model_n_vocab(m) }, two[2] = { 2, 2 };
    int held = moex_seq_n_past(c, 2);
    CHECK(held > 0);
    CHECK(moex_eval_batch(c, toks, two, 2) == -1 && moex_seq_n_past(c, 2) == held);
    CHECK(moex_seq_logits(c, 2) == NULL);
    CHECK(moex_seq_n_past(c, 0) == n_prompt[0] + N_GEN - 1);

    /* A copied sequence continues as its source does: a prompt evaluated
     * once in sequence 0, copied into 1 and 2, then one more token in all
     * three in one batch gives the same logits bytes in each (and the same
     * as sequence 0 had it gone on alone: split invariance). */
    CHECK(moex_seq_copy(c, 0, N_SEQ) == -1 && moex_seq_copy(c, -1, 0) == -1);
    moex_seq_truncate(c, 0, 0);
    CHECK(moex_eval_batch(c, prompt[1], (int32_t[24]){ 0 }, n_prompt[1]) == 0);
    size_t V = (size_t)moex_model_n_vocab(m);
    float *alone = malloc(sizeof(float) * V);
    for (int s = 1; s < N_SEQ; s++) {
        CHECK(moex_seq_copy(c, 0, s) == 0);
        CHECK(moex_seq_n_past(c, s) == n_prompt[1] && moex_seq_shared_prefix(c, s, prompt[1], n_prompt[1]) == n_prompt[1]);
        CHECK(moex_seq_logits(c, s) && !memcmp(moex_seq_logits(c, s), moex_seq_logits(c, 0), sizeof(float) * V));
    }
    int32_t next[N_SEQ] = { 7, 7, 7 }, seqs3[N_SEQ] = { 0, 1, 2 };
    CHECK(moex_eval_batch(c, next, seqs3, N_SEQ) == 0);
    for (int s = 1; s < N_SEQ; s++)
        CHECKF(!memcmp(moex_seq_logits(c, s), moex_seq_logits(c, 0), sizeof(float) * V), "%s: copy %d continues apart",
               preset, s);
    moex_context *one = moex_context_new(m, &cp);
    CHECK(one && moex_eval(one, prompt[1], n_prompt[1]) == 0 && moex_eval(one, &next[0], 1) == 0);
    if (one && alone) memcpy(alone, moex_logits(one), sizeof(float) * V);
    CHECKF(alone && !memcmp(alone, moex_seq_logits(c, 2), sizeof(float) * V), "%s: a copy vs alone: max diff %g", preset,
           alone ? max_abs_diff(alone, moex_seq_logits(c, 2), V) : -1.0);
    moex_context_free(one);
    free(alone);
    for (int s = 0; s < N_SEQ; s++) moex_sampler_free(smp[s]);
    moex_context_free(c);
    moex_model_free(m);
}

int main(void) {
    check_model("tiny");
    check_model("lfm2-tiny");
    check_model("qwen35-tiny");
    return test_finish();
}
