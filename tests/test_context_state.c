/* The context's per-layer state with a toy architecture that has one layer
 * of each kind: an attention-like layer (KV cache), a short convolution
 * (conv state of the last two inputs) and a recurrence (a state matrix).
 * Truncating and continuing, with and without a checkpoint, must give the
 * logits of the same tokens evaluated fresh, bit for bit; the memory per
 * kind must be what the layers declare. */
#include "harness.h"

#include "arch/arch.h"
#include "core/threadpool.h"
#include "model/context_impl.h"

#include <stdlib.h>
#include <string.h>

enum { D = 4, V = 8, N_TOKENS = 20 };

static float embd[V * D];
static bool fail_on_last_token; /* the pass fails at token V-1, after moving the state of those before it */

/* Token by token, so any batching gives the same numbers. */
static int toy_forward(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    for (int t = 0; t < n; t++) {
        if (fail_on_last_token && tokens[t] == V - 1) return -1;
        int pos = c->n_past + t;
        float x[D], y[D];
        memcpy(x, embd + tokens[t] * D, sizeof x);
        /* attention-like: the mean of every key so far */
        float *k = c->layers[0].k;
        memcpy(k + (size_t)pos * D, x, sizeof x);
        for (int i = 0; i < D; i++) {
            float s = 0;
            for (int p = 0; p <= pos; p++) s += k[(size_t)p * D + i];
            x[i] += s / (float)(pos + 1);
        }
        /* short conv: x + 0.5 x[-1] + 0.25 x[-2] */
        float *conv = c->layers[1].conv; /* (2, D): x[-2], x[-1] */
        for (int i = 0; i < D; i++) y[i] = x[i] + 0.5f * conv[D + i] + 0.25f * conv[i];
        memmove(conv, conv + D, sizeof(float) * D);
        memcpy(conv + D, x, sizeof x);
        /* recurrence: S = 0.9 S + y y^T, out = S y / 8 */
        float *S = c->layers[2].recurrent;
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) S[i * D + j] = 0.9f * S[i * D + j] + y[i] * y[j];
        for (int i = 0; i < D; i++) {
            float s = 0;
            for (int j = 0; j < D; j++) s += S[i * D + j] * y[j];
            x[i] = y[i] + s / 8;
        }
        float *out = all_logits ? (logits ? logits + (size_t)t * V : NULL) : t == n - 1 ? (logits ? logits : c->last_logits) : NULL;
        for (int v = 0; out && v < V; v++) {
            float s = 0;
            for (int i = 0; i < D; i++) s += x[i] * embd[v * D + i];
            out[v] = s;
        }
    }
    return 0;
}

static void *toy_workspace_new(const struct context *c) { (void)c; return malloc(1); }

static const struct arch toy_arch = {
    .name = "toy", .workspace_new = toy_workspace_new, .workspace_free = free, .forward = toy_forward,
};

static struct model *toy_model(void) {
    static struct model m;
    static struct layer_state state[3] = {
        { LAYER_ATTENTION, D, D, 0, 0 },
        { LAYER_SHORTCONV, 0, 0, 2 * D, 0 },
        { LAYER_DELTANET, 0, 0, 0, D * D },
    };
    for (int i = 0; i < V * D; i++) embd[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    m.arch = &toy_arch;
    m.hp = (struct model_hparams){ .n_layers = 3, .n_embd = D, .n_vocab = V, .n_ctx_train = 64, .rms_eps = 1e-6f };
    m.state = state;
    m.output = m.token_embd = (struct matrix){ embd, QT_F32, V, D, D * sizeof(float), NULL };
    m.moe = (struct moe_model_desc){ .n_layers = 0 };
    return &m;
}

static struct context *new_ctx(struct model *m, struct threadpool *pool, int n_batch) {
    struct context_params cp = { 32, n_batch, KV_F32, pool, NULL, NULL };
    struct context *c = context_new(m, &cp);
    CHECK(c != NULL);
    return c;
}

int main(void) {
    struct threadpool *pool = threadpool_new(1, false);
    struct model *m = toy_model();
    CHECK(model_is_recurrent(m));
    int32_t ids[N_TOKENS], other[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++) { ids[i] = (i * 5 + 3) % V; other[i] = (i * 3 + 1) % V; }
    float ref[N_TOKENS * V], got[N_TOKENS * V];

    struct context *fresh = new_ctx(m, pool, 32);
    CHECK(context_eval(fresh, ids, N_TOKENS, ref, true) == 0);
    struct context_memory mem;
    context_memory(fresh, &mem);
    CHECK(mem.kv == 2ull * 32 * D * sizeof(float));
    CHECK(mem.conv == 2 * D * sizeof(float) && mem.recurrent == D * D * sizeof(float));
    CHECK(mem.checkpoint == mem.conv + mem.recurrent);
    context_free(fresh);

    /* Without a checkpoint: the state is reset and the kept tokens replayed
     * (in batches of 4). */
    struct context *c = new_ctx(m, pool, 4);
    CHECK(context_eval(c, ids, 12, NULL, false) == 0);
    CHECK(context_eval(c, other, 5, NULL, false) == 0);
    context_truncate(c, 12);
    CHECK(context_n_past(c) == 12);
    CHECK(context_eval(c, ids + 12, N_TOKENS - 12, got, true) == 0);
    CHECK(context_replayed(c) == 12);
    CHECK(memcmp(got, ref + 12 * V, sizeof(float) * (N_TOKENS - 12) * V) == 0);

    /* With a checkpoint at or before the truncation point: only the tokens
     * after it are replayed. */
    context_truncate(c, 0);
    CHECK(context_eval(c, ids, 10, NULL, false) == 0);
    context_checkpoint(c);
    CHECK(context_eval(c, ids + 10, 4, NULL, false) == 0);
    CHECK(context_eval(c, other, 3, NULL, false) == 0);
    int64_t before = context_replayed(c);
    context_truncate(c, 14);
    CHECK(context_eval(c, ids + 14, N_TOKENS - 14, got, true) == 0);
    CHECK(context_replayed(c) - before == 4);
    CHECK(memcmp(got, ref + 14 * V, sizeof(float) * (N_TOKENS - 14) * V) == 0);

    /* Truncating below the checkpoint forgets it: the history it saved is gone. */
    context_truncate(c, 5);
    CHECK(context_eval(c, other, 7, NULL, false) == 0);
    context_truncate(c, 5);
    CHECK(context_eval(c, ids + 5, 7, NULL, false) == 0);
    before = context_replayed(c);
    context_truncate(c, 11);
    CHECK(context_eval(c, ids + 11, N_TOKENS - 11, got, true) == 0);
    CHECK(context_replayed(c) - before == 11);
    CHECK(memcmp(got, ref + 11 * V, sizeof(float) * (N_TOKENS - 11) * V) == 0);

    /* Two truncations before an eval replay once, to the second point. */
    context_truncate(c, 9);
    context_truncate(c, 6);
    before = context_replayed(c);
    CHECK(context_eval(c, ids + 6, N_TOKENS - 6, got, true) == 0);
    CHECK(context_replayed(c) - before == 6);
    CHECK(memcmp(got, ref + 6 * V, sizeof(float) * (N_TOKENS - 6) * V) == 0);

    /* A checkpoint asked for right after a truncation that must replay is
     * taken once the replay gets there: the next truncation back to it
     * replays nothing. */
    context_truncate(c, 8);
    context_checkpoint(c);
    CHECK(context_eval(c, ids + 8, 5, NULL, false) == 0);
    CHECK(context_eval(c, other, 2, NULL, false) == 0);
    before = context_replayed(c);
    context_truncate(c, 8);
    CHECK(context_eval(c, ids + 8, N_TOKENS - 8, got, true) == 0);
    CHECK(context_replayed(c) == before);
    CHECK(memcmp(got, ref + 8 * V, sizeof(float) * (N_TOKENS - 8) * V) == 0);

    /* A pass that fails half way leaves no moved state behind. */
    context_truncate(c, 10);
    fail_on_last_token = true;
    const int32_t bad[3] = { 1, 2, V - 1 };
    CHECK(context_eval(c, bad, 3, NULL, false) == -1);
    fail_on_last_token = false;
    CHECK(context_n_past(c) == 10);
    CHECK(context_eval(c, ids + 10, N_TOKENS - 10, got, true) == 0);
    CHECK(memcmp(got, ref + 10 * V, sizeof(float) * (N_TOKENS - 10) * V) == 0);

    /* The last token's logits alone, after a truncation. */
    context_truncate(c, 15);
    float last[V];
    CHECK(context_eval(c, ids + 15, N_TOKENS - 15, last, false) == 0);
    CHECK(memcmp(last, ref + (N_TOKENS - 1) * V, sizeof last) == 0);
    CHECK(context_n_past(c) == N_TOKENS);
    context_free(c);
    threadpool_free(pool);
    return test_finish();
}
