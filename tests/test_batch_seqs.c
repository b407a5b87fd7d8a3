/* Several sequences in one context: three sequences evaluated interleaved in
 * one batch (prompts, then decode steps of one token each, a step where one
 * sequence sits out and one where a sequence gives two tokens) give each
 * sequence the logits it gets evaluated alone with the same pieces, for
 * qwen3moe, lfm2moe and qwen35moe synth models.
 *
 * F16 models: bit for bit. Every kernel computes each row on its own, and
 * the gemm tile of a row does not depend on how many rows share it.
 * Quantized models: a token evaluated alone (one row: decode) takes the
 * weight type's vec_dot instead of the gemm tile, and for matrices without a
 * row-interleaved copy (Q5_K, Q8_0; Q4_K whose rows are no multiple of 16)
 * the two sum the blocks in another order: within 1e-4 (about 1e-5 seen).
 * Interleaved matrices (Q4_K, Q6_K where this machine has their kernels) use
 * one kernel for any row count: a model whose every matrix is interleaved or
 * float (Q4_K synth here with AVX-512; Q4_K_M Qwen3-30B-A3B) gives the same
 * bits, and is checked so where it is.
 *
 * Truncating one sequence leaves the others alone (and the truncated one
 * replays to the logits of a fresh context: bit for bit, but for qwen35moe
 * within the chunk bound below). A batch longer than
 * n_batch goes in several passes: the delta net's chunks then start
 * elsewhere in a sequence, and its chunked form sums in another order than
 * the token-by-token one (qwen35moe: within 2e-2 there, about 5e-3 seen). */
#include "harness.h"

#include "arch/arch.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "model/context.h"
#include "model/model.h"
#include "quant/matmul.h"
#include "synth/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_SEQ = 3, N_CTX = 64, MAX_STEP = 16 };

/* The pieces each sequence evaluates, step by step (0: it sits out). */
static const int pieces[][N_SEQ] = {
    { 7, 12, 3 },  /* prompts */
    { 1, 1, 1 },
    { 1, 1, 1 },
    { 1, 0, 1 },   /* sequence 1 sits out */
    { 2, 1, 1 },   /* sequence 0 gives two tokens */
    { 1, 1, 1 },
};
enum { N_STEPS = sizeof pieces / sizeof pieces[0] };

static int32_t token_of(int seq, int pos) { return (int32_t)((seq * 131 + pos * 17 + 5) % 251); }

/* logits (steps, seq, V) of each sequence evaluated alone in those pieces. */
static void eval_alone(struct model *m, struct threadpool *pool, float *ref) {
    int V = m->hp.n_vocab;
    for (int s = 0; s < N_SEQ; s++) {
        struct context_params cp = { .n_ctx = N_CTX, .n_batch = 32, .kv_type = KV_F16, .pool = pool };
        struct context *c = context_new(m, &cp);
        CHECKF(c != NULL, "%s", moex_error());
        if (!c) return;
        int pos = 0;
        for (int st = 0; st < N_STEPS; st++) {
            int32_t ids[MAX_STEP];
            int n = pieces[st][s];
            if (!n) continue;
            for (int i = 0; i < n; i++) ids[i] = token_of(s, pos + i);
            CHECK(context_eval(c, ids, n, ref + ((size_t)st * N_SEQ + s) * V, false) == 0);
            pos += n;
        }
        context_free(c);
    }
}

/* The same steps, all sequences in one batch per step, tokens interleaved
 * in an order that changes with the step. Returns the steps whose logits
 * differ from ref in any bit. */
static int eval_batched(struct model *m, struct threadpool *pool, const float *ref, int n_batch, double *worst) {
    int V = m->hp.n_vocab, bad = 0;
    struct context_params cp = { .n_ctx = N_CTX, .n_batch = n_batch, .kv_type = KV_F16, .pool = pool };
    struct context *c = context_new_seqs(m, &cp, N_SEQ);
    CHECKF(c != NULL, "%s", moex_error());
    if (!c) return N_STEPS;
    float *logits = malloc(sizeof(float) * N_SEQ * (size_t)V);
    float *rows[N_SEQ] = { logits, logits + V, logits + 2 * V };
    int pos[N_SEQ] = { 0 };
    *worst = 0;
    for (int st = 0; st < N_STEPS; st++) {
        int32_t ids[N_SEQ * MAX_STEP], seqs[N_SEQ * MAX_STEP];
        int n = 0, taken[N_SEQ] = { 0 };
        for (bool more = true; more;) { /* round robin, starting from sequence st % N_SEQ */
            more = false;
            for (int k = 0; k < N_SEQ; k++) {
                int s = (st + k) % N_SEQ;
                if (taken[s] == pieces[st][s]) continue;
                seqs[n] = s;
                ids[n++] = token_of(s, pos[s] + taken[s]++);
                more = true;
            }
        }
        for (size_t i = 0; i < N_SEQ * (size_t)V; i++) logits[i] = NAN;
        CHECKF(context_eval_seqs(c, ids, seqs, n, rows) == 0, "%s", moex_error());
        for (int s = 0; s < N_SEQ; s++) {
            const float *want = ref + ((size_t)st * N_SEQ + s) * V, *got = logits + (size_t)s * V;
            pos[s] += pieces[st][s];
            CHECK(context_seq_n_past(c, s) == pos[s]);
            if (!pieces[st][s]) {
                CHECK(isnan(got[0])); /* a sequence that sat out gets no logits */
                continue;
            }
            bool same = !memcmp(want, got, sizeof(float) * (size_t)V);
            for (int v = 0; v < V; v++) {
                double d = fabs((double)want[v] - got[v]);
                if (d > *worst || d != d) *worst = d != d ? INFINITY : d;
            }
            if (!same) bad++;
        }
    }
    free(logits);
    context_free(c);
    return bad;
}

/* Sequence 1 truncated back and continued with other tokens: its logits
 * equal a fresh context's on those tokens, and the other sequences' state
 * is untouched (their next logits equal the untruncated run's). */
static void check_truncate(struct model *m, struct threadpool *pool, bool recurrent) {
    int V = m->hp.n_vocab;
    struct context_params cp = { .n_ctx = N_CTX, .n_batch = 32, .kv_type = KV_F16, .pool = pool };
    struct context *c = context_new_seqs(m, &cp, N_SEQ), *alone = context_new(m, &cp), *ref0 = context_new(m, &cp);
    float *logits = malloc(sizeof(float) * N_SEQ * (size_t)V), *want = malloc(sizeof(float) * (size_t)V);
    CHECK(c && alone && ref0 && logits && want);
    if (!c || !alone || !ref0 || !logits || !want) goto done;
    float *rows[N_SEQ] = { logits, logits + V, logits + 2 * V };
    int32_t ids[20], seqs[20], mine[10];
    for (int i = 0; i < 10; i++) {
        ids[2 * i] = token_of(0, i); seqs[2 * i] = 0;
        ids[2 * i + 1] = token_of(1, i); seqs[2 * i + 1] = 1;
        mine[i] = i < 4 ? token_of(1, i) : token_of(2, i);
    }
    CHECK(context_eval_seqs(c, ids, seqs, 20, rows) == 0);
    context_seq_truncate(c, 1, 4);
    CHECK(context_seq_n_past(c, 1) == 4 && context_seq_n_past(c, 0) == 10);
    /* sequence 1 goes on with 6 other tokens, sequence 0 with one more */
    int32_t more[7] = { token_of(0, 10) }, more_seq[7] = { 0 };
    for (int i = 0; i < 6; i++) { more[i + 1] = mine[4 + i]; more_seq[i + 1] = 1; }
    CHECK(context_eval_seqs(c, more, more_seq, 7, rows) == 0);
    CHECK(context_eval(alone, mine, 10, want, false) == 0);
    /* Recurrent state is replayed from the start: 4 tokens, then the 6 new
     * ones, where the fresh context takes all 10 at once, so the delta net's
     * chunks split elsewhere (the n_batch 8 bound below). */
    if (recurrent) {
        double worst = 0;
        for (int i = 0; i < V; i++) worst = fmax(worst, fabs((double)want[i] - logits[V + i]));
        CHECKF(worst < 2e-2, "truncated and replayed: largest |diff| %g", worst);
    } else {
        CHECK(!memcmp(want, logits + V, sizeof(float) * (size_t)V));
    }
    int32_t seq0[11];
    for (int i = 0; i < 11; i++) seq0[i] = token_of(0, i);
    CHECK(context_eval(ref0, seq0, 10, NULL, false) == 0 && context_eval(ref0, seq0 + 10, 1, want, false) == 0);
    CHECK(!memcmp(want, logits, sizeof(float) * (size_t)V));
    /* errors: a sequence id out of range, a sequence that would overflow */
    int32_t bad_seq = N_SEQ, tok = 1;
    CHECK(context_eval_seqs(c, &tok, &bad_seq, 1, rows) == -1 && strstr(moex_error(), "sequence id"));
    int32_t big[N_CTX], big_seq[N_CTX];
    for (int i = 0; i < N_CTX; i++) { big[i] = 1; big_seq[i] = 2; }
    CHECK(context_eval_seqs(c, big, big_seq, N_CTX, NULL) == 0);
    CHECK(context_eval_seqs(c, big, big_seq, 1, rows) == -1 && strstr(moex_error(), "full"));
done:
    free(logits);
    free(want);
    context_free(c);
    context_free(alone);
    context_free(ref0);
}

static bool one_kernel(const struct matrix *w) {
    return w->r16 || w->type == QT_F32 || w->type == QT_F16 || w->type == QT_BF16;
}

/* Whether every matmul of the model runs one kernel for any number of rows
 * (after a context made the interleaved copies). */
static bool all_one_kernel(const struct model *m) {
    bool all = one_kernel(&m->output);
    for (int i = 0; i < m->n_matrices; i++)
        if (m->matrices[i]->data != m->token_embd.data) all = all && one_kernel(m->matrices[i]); /* embedding: rows */
    for (int l = 0; l < m->moe.n_layers; l++)
        all = all && one_kernel(&m->moe_layers[l].gate) && one_kernel(&m->moe_layers[l].up) &&
              one_kernel(&m->moe_layers[l].down);
    return all;
}

static void check_arch(const char *preset, enum synth_type type, struct threadpool *pool) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", test_tmpdir(), preset, synth_type_name(type));
    struct synth_params p;
    CHECK(synth_preset(preset, &p) == 0);
    p.type = type;
    CHECKF(synth_write(&p, path) == 0, "%s", moex_error());
    struct model *m = model_load(path);
    CHECKF(m != NULL, "%s", moex_error());
    if (!m) return;
    int V = m->hp.n_vocab;
    float *ref = malloc(sizeof(float) * N_STEPS * N_SEQ * (size_t)V);
    eval_alone(m, pool, ref);
    bool exact = all_one_kernel(m);
    CHECK(exact || type != SYNTH_F16);
    double worst;
    int bad = eval_batched(m, pool, ref, 32, &worst);
    const char *tn = synth_type_name(type);
    printf("%-12s %-6s %s (%s): %d of %d sequence steps differ from alone, largest |diff| %g\n", preset, tn,
           m->arch->name, exact ? "one kernel for any rows: same bits" : "vec_dot alone, gemm tile batched", bad,
           N_STEPS * N_SEQ, worst);
    if (exact) CHECKF(bad == 0, "%s %s: batched logits differ from alone (largest |diff| %g)", preset, tn, worst);
    else CHECKF(worst < 1e-4, "%s %s: batched logits: largest |diff| %g", preset, tn, worst);
    /* n_batch 8: the 22 prompt tokens go in three passes */
    bad = eval_batched(m, pool, ref, 8, &worst);
    bool recurrent = !strcmp(m->arch->name, "qwen35moe");
    printf("%-12s %-6s n_batch 8: %d differ, largest |diff| %g\n", preset, tn, bad, worst);
    if (exact && !recurrent) CHECKF(bad == 0, "%s %s: n_batch 8: logits differ (largest |diff| %g)", preset, tn, worst);
    else CHECKF(worst < (recurrent ? 2e-2 : 1e-4), "%s %s: n_batch 8: largest |diff| %g", preset, tn, worst);
    if (exact) check_truncate(m, pool, recurrent);
    free(ref);
    model_free(m);
}

int main(void) {
    struct threadpool *pool = threadpool_new(2, false);
    static const char *const presets[] = { "tiny", "lfm2-tiny", "qwen35-tiny" };
    for (int i = 0; i < 3; i++) {
        check_arch(presets[i], SYNTH_F16, pool);
        check_arch(presets[i], SYNTH_Q4_K, pool);
        check_arch(presets[i], SYNTH_Q4_K_M, pool);
    }
    threadpool_free(pool);
    return test_finish();
}
