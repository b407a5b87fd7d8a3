/* The evaluation context, for every architecture: per-layer state slices
 * sized by the architecture's declaration and allocated once, the scratch of
 * a batch, the eval loop (batches split at n_batch, tokens kept), truncation
 * with checkpoint or replay for recurrent state, and the op times. */
#include "model/context_impl.h"

#include "arch/arch.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "moe/executor.h"

#include <stdlib.h>
#include <string.h>

static size_t max_scratch(const struct model *m, int M) {
    size_t best = matmul_scratch_size(&m->output, M);
    for (int i = 0; i < m->n_matrices; i++) {
        size_t s = matmul_scratch_size(m->matrices[i], M);
        if (s > best) best = s;
    }
    return best;
}

/* a * b * c bytes, or 0 when that overflows size_t. */
static size_t bytes3(size_t a, size_t b, size_t c) {
    size_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return 0;
    return abc;
}

/* Carves every layer's state out of two blocks: KV caches, and the conv and
 * recurrent floats. */
static int alloc_state(struct context *c) {
    const struct model *m = c->m;
    int L = m->hp.n_layers;
    if (L <= 0) return moex_errorf("the model has no layers");
    size_t kv_total = 0, rec_total = 0;
    for (int l = 0; l < L; l++) {
        const struct layer_state *st = &m->state[l];
        size_t k = bytes3((size_t)st->kv_k, (size_t)c->n_ctx, c->kv_elem);
        size_t v = bytes3((size_t)st->kv_v, (size_t)c->n_ctx, c->kv_elem);
        if ((st->kv_k && !k) || (st->kv_v && !v) || kv_total + k + v < kv_total ||
            st->conv_floats < 0 || st->recurrent_floats < 0)
            return moex_errorf("the state of layer %d does not fit in memory", l);
        kv_total += k + v;
        rec_total += (size_t)st->conv_floats + (size_t)st->recurrent_floats;
    }
    c->layers = calloc((size_t)L, sizeof *c->layers);
    c->kv_mem = malloc(kv_total ? kv_total : 1);
    c->recurrent_total = rec_total;
    if (rec_total) {
        c->recurrent_mem = calloc(rec_total, sizeof(float));
        c->checkpoint = malloc(rec_total * sizeof(float));
    }
    if (!c->layers || !c->kv_mem || (rec_total && (!c->recurrent_mem || !c->checkpoint)))
        return moex_errorf("out of memory for a context of %d tokens (KV cache %.1f MiB, recurrent state %.1f MiB)",
                           c->n_ctx, kv_total / 1048576.0, 2.0 * rec_total * sizeof(float) / 1048576.0);
    char *kv = c->kv_mem;
    float *rec = c->recurrent_mem;
    for (int l = 0; l < L; l++) {
        const struct layer_state *st = &m->state[l];
        struct layer_slice *s = &c->layers[l];
        if (st->kv_k) { s->k = kv; kv += (size_t)st->kv_k * c->n_ctx * c->kv_elem; }
        if (st->kv_v) { s->v = kv; kv += (size_t)st->kv_v * c->n_ctx * c->kv_elem; }
        if (st->conv_floats) { s->conv = rec; rec += st->conv_floats; }
        if (st->recurrent_floats) { s->recurrent = rec; rec += st->recurrent_floats; }
    }
    c->checkpoint_pos = c->checkpoint_wanted = -1;
    return 0;
}

struct context *context_new(struct model *m, const struct context_params *p) {
    struct context *c = calloc(1, sizeof *c);
    if (!c) { moex_errorf("out of memory"); return NULL; }
    const struct model_hparams *hp = &m->hp;
    c->m = m;
    c->pool = p->pool;
    c->n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    c->kv_type = p->kv_type;
    c->kv_elem = p->kv_type == KV_F32 ? 4 : 2;
    if (alloc_state(c)) {
        context_free(c);
        return NULL;
    }
    size_t B = (size_t)c->n_batch, D = (size_t)hp->n_embd;
    c->tokens = malloc(sizeof *c->tokens * (size_t)c->n_ctx);
    c->x = malloc(B * D * 4);
    c->xn = malloc(B * D * 4);
    c->tmp = malloc(B * D * 4);
    c->last_logits = malloc((size_t)hp->n_vocab * 4);
    c->act_bytes = max_scratch(m, c->n_batch);
    c->act = malloc(c->act_bytes);
    if (!c->tokens || !c->x || !c->xn || !c->tmp || !c->last_logits || !c->act) {
        context_free(c);
        moex_errorf("out of memory for a context of %d tokens", c->n_ctx);
        return NULL;
    }
    struct moe_exec_options cpu_only = { 0 };
    c->exec = moe_executor_new(&m->moe, c->pool, c->n_batch, p->experts ? p->experts : &cpu_only);
    if (c->exec && model_interleave(m, c->pool)) {
        context_free(c);
        return NULL;
    }
    if (!c->exec || !(c->ws = m->arch->workspace_new(c))) {
        if (c->exec) moex_errorf("out of memory for a context of %d tokens", c->n_ctx);
        context_free(c);
        return NULL;
    }
    return c;
}

void context_free(struct context *c) {
    if (!c) return;
    if (c->ws) c->m->arch->workspace_free(c->ws);
    moe_executor_free(c->exec);
    free(c->layers); free(c->kv_mem); free(c->recurrent_mem); free(c->checkpoint); free(c->tokens);
    free(c->x); free(c->xn); free(c->tmp); free(c->act); free(c->last_logits);
    free(c);
}

int context_n_past(const struct context *c) { return c->n_kept; }
int context_n_ctx(const struct context *c) { return c->n_ctx; }
struct model *context_model(struct context *c) { return c->m; }
struct moe_executor *context_executor(struct context *c) { return c->exec; }
const struct op_times *context_op_times(const struct context *c) { return &c->times; }
void context_reset_op_times(struct context *c) { memset(&c->times, 0, sizeof c->times); }
int64_t context_replayed(const struct context *c) { return c->replayed; }
void context_set_route_observer(struct context *c, route_observer_fn fn, void *user) {
    c->on_route = fn;
    c->route_user = user;
}

void context_memory(const struct context *c, struct context_memory *out) {
    memset(out, 0, sizeof *out);
    for (int l = 0; l < c->m->hp.n_layers; l++) {
        const struct layer_state *st = &c->m->state[l];
        out->kv += (uint64_t)(st->kv_k + st->kv_v) * (uint64_t)c->n_ctx * c->kv_elem;
        out->conv += (uint64_t)st->conv_floats * sizeof(float);
        out->recurrent += (uint64_t)st->recurrent_floats * sizeof(float);
    }
    out->checkpoint = c->checkpoint ? c->recurrent_total * sizeof(float) : 0;
    out->scratch = (uint64_t)c->n_batch * c->m->hp.n_embd * 3 * sizeof(float) + c->act_bytes +
                   (uint64_t)c->m->hp.n_vocab * sizeof(float);
}

static void save_checkpoint(struct context *c) {
    if (c->recurrent_total) memcpy(c->checkpoint, c->recurrent_mem, c->recurrent_total * sizeof(float));
    c->checkpoint_pos = c->n_past;
    c->checkpoint_wanted = -1;
}

void context_checkpoint(struct context *c) {
    /* A state still to be replayed is saved when the replay reaches here. */
    if (c->n_past < c->n_kept) c->checkpoint_wanted = c->n_kept;
    else save_checkpoint(c);
}

/* Recurrent state cannot be rolled back: it goes back to the checkpoint when
 * that is at or before n_kept, else to the start; the next eval replays. */
static void rewind_state(struct context *c) {
    /* A checkpoint past the kept tokens describes a history that is gone. */
    if (c->checkpoint_pos > c->n_kept) c->checkpoint_pos = -1;
    if (c->checkpoint_pos >= 0) {
        memcpy(c->recurrent_mem, c->checkpoint, c->recurrent_total * sizeof(float));
        c->n_past = c->checkpoint_pos;
    } else {
        memset(c->recurrent_mem, 0, c->recurrent_total * sizeof(float));
        c->n_past = 0;
    }
}

void context_truncate(struct context *c, int n_past) {
    if (n_past < 0) n_past = 0;
    if (n_past >= c->n_kept) return;
    c->n_kept = n_past;
    if (c->checkpoint_wanted > n_past) c->checkpoint_wanted = -1;
    if (!c->recurrent_total || n_past >= c->n_past) {
        /* KV caches only: later positions are simply overwritten. A state
         * still to be replayed up to n_past stays so. */
        if (c->n_past > n_past) c->n_past = n_past;
        if (c->checkpoint_pos > n_past) c->checkpoint_pos = -1;
        return;
    }
    rewind_state(c);
}

/* The sum of every op time: the struct is int64_t fields only, whatever
 * fields architectures add to it. */
static int64_t timed_ops(const struct op_times *t) {
    int64_t f[sizeof *t / sizeof(int64_t)], sum = 0;
    _Static_assert(sizeof *t % sizeof(int64_t) == 0, "struct op_times holds int64_t fields only");
    memcpy(f, t, sizeof f);
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) sum += f[i];
    return sum;
}

/* n tokens (at most n_batch) at n_past, then kept. The forward pass's time
 * that its blocks do not count goes to `other`. */
static int eval_batch(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    int64_t t0 = time_ns(), counted = timed_ops(&c->times);
    moe_executor_begin_batch(c->exec, n);
    if (c->m->arch->forward(c, tokens, n, logits, all_logits)) {
        /* A pass that stopped half way may have moved recurrent state. */
        if (c->recurrent_total) rewind_state(c);
        return -1;
    }
    int64_t rest = time_ns() - t0 - (timed_ops(&c->times) - counted);
    if (rest > 0) c->times.other += rest;
    if (tokens != c->tokens + c->n_past) memcpy(c->tokens + c->n_past, tokens, sizeof *tokens * (size_t)n);
    c->n_past += n;
    if (c->n_kept < c->n_past) c->n_kept = c->n_past;
    return 0;
}

/* Brings the state from n_past up to the kept tokens. */
static int replay(struct context *c) {
    while (c->n_past < c->n_kept) {
        int chunk = c->n_kept - c->n_past < c->n_batch ? c->n_kept - c->n_past : c->n_batch;
        c->replayed += chunk;
        if (eval_batch(c, c->tokens + c->n_past, chunk, NULL, true)) return -1;
    }
    return 0;
}

int context_eval(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model_hparams *hp = &c->m->hp;
    if (n <= 0) return moex_errorf("nothing to evaluate");
    if (c->n_kept + n > c->n_ctx)
        return moex_errorf("context is full: %d + %d tokens exceed the context of %d", c->n_kept, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return moex_errorf("token id %d is out of range (vocabulary of %d)", tokens[i], hp->n_vocab);
    if (replay(c)) return -1;
    if (c->checkpoint_wanted == c->n_past) save_checkpoint(c);
    for (int done = 0; done < n;) {
        int chunk = n - done < c->n_batch ? n - done : c->n_batch;
        bool last = done + chunk == n;
        float *out = logits;
        if (logits && all_logits) out = logits + (size_t)done * hp->n_vocab;
        else if (!last) out = NULL;
        if (eval_batch(c, tokens + done, chunk, out, all_logits || !last)) return -1;
        done += chunk;
    }
    return 0;
}
