/* The evaluation context, for every architecture: per-layer state slices
 * sized by the architecture's declaration and allocated once, the scratch of
 * a batch, the eval loop (batches split at n_batch, tokens kept), truncation
 * with checkpoint or replay for recurrent state, and the op times. */
#include "model/context_impl.h"

#include "arch/arch.h"
#include "arch/block_norm.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "moe/executor.h"
#include "pack/packfile.h"

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

/* Carves every sequence's and layer's state out of two blocks: KV caches,
 * and the conv and recurrent floats (every sequence's, then their
 * checkpoints). */
static int alloc_state(struct context *c) {
    const struct model *m = c->m;
    int L = m->hp.n_layers, S = c->n_seq;
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
    size_t kv_all = bytes3(kv_total, (size_t)S, 1), rec_all = bytes3(rec_total, (size_t)S, 2);
    if ((kv_total && !kv_all) || (rec_total && !rec_all))
        return moex_errorf("the state of %d sequences does not fit in memory", S);
    c->seqs = calloc((size_t)S, sizeof *c->seqs);
    struct layer_slice *slices = calloc((size_t)L * (size_t)S, sizeof *slices);
    c->kv_mem = malloc(kv_all ? kv_all : 1);
    c->recurrent_total = rec_total;
    if (rec_total) c->recurrent_mem = calloc(rec_all, sizeof(float));
    if (!c->seqs || !slices || !c->kv_mem || (rec_total && !c->recurrent_mem)) {
        free(slices);
        return moex_errorf("out of memory for a context of %d tokens (KV cache %.1f MiB, recurrent state %.1f MiB)",
                           c->n_ctx, kv_all / 1048576.0, (double)rec_all * sizeof(float) / 1048576.0);
    }
    char *kv = c->kv_mem;
    float *rec = c->recurrent_mem;
    for (int q = 0; q < S; q++) {
        struct sequence *sq = &c->seqs[q];
        sq->layers = slices + (size_t)q * L;
        if (rec_total) {
            sq->recurrent = rec;
            sq->checkpoint = c->recurrent_mem + (size_t)S * rec_total + (size_t)q * rec_total;
        }
        for (int l = 0; l < L; l++) {
            const struct layer_state *st = &m->state[l];
            struct layer_slice *s = &sq->layers[l];
            if (st->kv_k) { s->k = kv; kv += (size_t)st->kv_k * c->n_ctx * c->kv_elem; }
            if (st->kv_v) { s->v = kv; kv += (size_t)st->kv_v * c->n_ctx * c->kv_elem; }
            if (st->conv_floats) { s->conv = rec; rec += st->conv_floats; }
            if (st->recurrent_floats) { s->recurrent = rec; rec += st->recurrent_floats; }
        }
        sq->checkpoint_pos = sq->checkpoint_wanted = -1;
        if (!(sq->tokens = malloc(sizeof *sq->tokens * (size_t)c->n_ctx)))
            return moex_errorf("out of memory for a context of %d tokens", c->n_ctx);
    }
    c->layers = c->seqs[0].layers;
    return 0;
}

struct context *context_new(struct model *m, const struct context_params *p) { return context_new_seqs(m, p, 1); }

struct context *context_new_seqs(struct model *m, const struct context_params *p, int n_seq) {
    if (n_seq < 1 || n_seq > CONTEXT_MAX_SEQS) {
        moex_errorf("a context holds 1 to %d sequences, not %d", CONTEXT_MAX_SEQS, n_seq);
        return NULL;
    }
    struct context *c = calloc(1, sizeof *c);
    if (!c) { moex_errorf("out of memory"); return NULL; }
    const struct model_hparams *hp = &m->hp;
    c->m = m;
    c->pool = p->pool;
    if (p->n_ctx < 0 || p->n_ctx > CONTEXT_MAX_TOKENS || p->n_batch < 0) {
        if (p->n_batch < 0) moex_errorf("n_batch %d is negative (0: the default)", p->n_batch);
        else moex_errorf("n_ctx %d is not in 0..%d tokens (0: the default)", p->n_ctx, CONTEXT_MAX_TOKENS);
        free(c);
        return NULL;
    }
    c->n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    c->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    /* A pass never holds more tokens than the sequences have positions. */
    if ((int64_t)c->n_batch > (int64_t)c->n_ctx * n_seq) c->n_batch = (int)((int64_t)c->n_ctx * n_seq);
    c->n_seq = n_seq;
    c->kv_type = p->kv_type;
    c->kv_elem = p->kv_type == KV_F32 ? 4 : 2;
    if (alloc_state(c)) {
        context_free(c);
        return NULL;
    }
    size_t B = (size_t)c->n_batch, D = (size_t)hp->n_embd;
    size_t max_runs = (size_t)(c->n_seq < c->n_batch ? c->n_seq : c->n_batch);
    c->x = malloc(B * D * 4);
    c->xn = malloc(B * D * 4);
    c->tmp = malloc(B * D * 4);
    c->last_logits = malloc((size_t)hp->n_vocab * 4);
    c->act_bytes = max_scratch(m, c->n_batch);
    c->act = malloc(c->act_bytes);
    c->run_buf = malloc(sizeof *c->run_buf * (size_t)c->n_seq);
    c->seq_left = calloc((size_t)c->n_seq, sizeof *c->seq_left);
    c->pass_tokens = malloc(sizeof *c->pass_tokens * B);
    c->run_logits = malloc(max_runs * (size_t)hp->n_vocab * 4);
    if (!c->x || !c->xn || !c->tmp || !c->last_logits || !c->act || !c->run_buf || !c->seq_left || !c->pass_tokens ||
        !c->run_logits) {
        moex_errorf("out of memory for a context of %d tokens (scratch of a batch of %d)", c->n_ctx, c->n_batch);
        context_free(c);
        return NULL;
    }
    /* The pack file is opened once for the executor and the CPU's layout. */
    struct packfile_shared pack;
    if (p->pack_path) packfile_open_shared(p->pack_path, &pack);
    struct moe_exec_options eo = { 0 };
    if (p->experts) eo = *p->experts;
    if (p->pack_path) eo.pack_shared = &pack;
    c->exec = moe_executor_new(&m->moe, c->pool, c->n_batch, &eo);
    int rc = c->exec ? model_interleave(m, c->pool, p->pack_path ? &pack : NULL) : 0;
    if (p->pack_path) packfile_close(pack.pf);
    if (rc) {
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
    if (c->seqs) {
        for (int q = 0; q < c->n_seq; q++) free(c->seqs[q].tokens);
        free(c->seqs[0].layers); /* every sequence's slices, in one block */
    }
    free(c->seqs); free(c->kv_mem); free(c->recurrent_mem);
    free(c->x); free(c->xn); free(c->tmp); free(c->act); free(c->last_logits);
    free(c->run_buf); free(c->seq_left); free(c->pass_tokens); free(c->run_logits);
    free(c);
}

int context_n_past(const struct context *c) { return c->seqs[0].n_kept; }
int context_n_ctx(const struct context *c) { return c->n_ctx; }
int context_n_seq(const struct context *c) { return c->n_seq; }
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
    out->kv *= (uint64_t)c->n_seq;
    out->conv *= (uint64_t)c->n_seq;
    out->recurrent *= (uint64_t)c->n_seq;
    out->checkpoint = (uint64_t)c->recurrent_total * c->n_seq * sizeof(float);
    size_t max_runs = (size_t)(c->n_seq < c->n_batch ? c->n_seq : c->n_batch);
    out->scratch = (uint64_t)c->n_batch * c->m->hp.n_embd * 3 * sizeof(float) + c->act_bytes +
                   (uint64_t)c->m->hp.n_vocab * sizeof(float) * (1 + max_runs);
}

static void save_checkpoint(struct context *c, struct sequence *q) {
    if (c->recurrent_total) memcpy(q->checkpoint, q->recurrent, c->recurrent_total * sizeof(float));
    q->checkpoint_pos = q->n_past;
    q->checkpoint_wanted = -1;
}

static struct sequence *seq_at(const struct context *c, int seq) {
    return seq >= 0 && seq < c->n_seq ? &c->seqs[seq] : NULL;
}

void context_seq_checkpoint(struct context *c, int seq) {
    struct sequence *q = seq_at(c, seq);
    if (!q) return;
    /* A state still to be replayed is saved when the replay reaches here. */
    if (q->n_past < q->n_kept) q->checkpoint_wanted = q->n_kept;
    else save_checkpoint(c, q);
}

void context_checkpoint(struct context *c) { context_seq_checkpoint(c, 0); }

/* Recurrent state cannot be rolled back: it goes back to the checkpoint when
 * that is at or before n_kept, else to the start; the next eval replays. */
static void rewind_state(struct context *c, struct sequence *q) {
    /* A checkpoint past the kept tokens describes a history that is gone. */
    if (q->checkpoint_pos > q->n_kept) q->checkpoint_pos = -1;
    if (q->checkpoint_pos >= 0) {
        memcpy(q->recurrent, q->checkpoint, c->recurrent_total * sizeof(float));
        q->n_past = q->checkpoint_pos;
    } else {
        memset(q->recurrent, 0, c->recurrent_total * sizeof(float));
        q->n_past = 0;
    }
}

void context_seq_truncate(struct context *c, int seq, int n_past) {
    struct sequence *q = seq_at(c, seq);
    if (!q) return;
    if (n_past < 0) n_past = 0;
    if (n_past >= q->n_kept) return;
    q->n_kept = n_past;
    if (q->checkpoint_wanted > n_past) q->checkpoint_wanted = -1;
    if (!c->recurrent_total || n_past >= q->n_past) {
        /* KV caches only: later positions are simply overwritten. A state
         * still to be replayed up to n_past stays so. */
        if (q->n_past > n_past) q->n_past = n_past;
        if (q->checkpoint_pos > n_past) q->checkpoint_pos = -1;
        return;
    }
    rewind_state(c, q);
}

void context_truncate(struct context *c, int n_past) { context_seq_truncate(c, 0, n_past); }

int context_seq_copy(struct context *c, int src, int dst) {
    struct sequence *s = seq_at(c, src), *d = seq_at(c, dst);
    if (!s || !d) return moex_errorf("sequence copy %d -> %d: out of range (%d sequences)", src, dst, c->n_seq);
    if (s == d) return 0;
    /* KV rows are position-major: the first n_past rows of each layer */
    for (int l = 0; l < c->m->hp.n_layers; l++) {
        const struct layer_state *st = &c->m->state[l];
        if (st->kv_k) memcpy(d->layers[l].k, s->layers[l].k, (size_t)st->kv_k * (size_t)s->n_past * c->kv_elem);
        if (st->kv_v) memcpy(d->layers[l].v, s->layers[l].v, (size_t)st->kv_v * (size_t)s->n_past * c->kv_elem);
    }
    if (c->recurrent_total) {
        memcpy(d->recurrent, s->recurrent, c->recurrent_total * sizeof(float));
        memcpy(d->checkpoint, s->checkpoint, c->recurrent_total * sizeof(float));
    }
    memcpy(d->tokens, s->tokens, sizeof *d->tokens * (size_t)s->n_kept);
    d->n_past = s->n_past;
    d->n_kept = s->n_kept;
    d->checkpoint_pos = s->checkpoint_pos;
    d->checkpoint_wanted = s->checkpoint_wanted;
    return 0;
}

int context_seq_n_past(const struct context *c, int seq) {
    const struct sequence *q = seq_at(c, seq);
    return q ? q->n_kept : 0;
}

static const struct { const char *name; bool common; } op_kinds[OP_KINDS] = {
    [OP_ATTN_MATMUL] = { "attention matmuls", true }, [OP_ATTENTION] = { "attention", true },
    [OP_ROUTER] = { "router", true },                 [OP_EXPERTS] = { "experts", true },
    [OP_LM_HEAD] = { "lm head", true },               [OP_SHORTCONV] = { "short conv", false },
    [OP_DENSE_FFN] = { "dense ffn", false },          [OP_DELTA_NET] = { "delta net", false },
    [OP_OTHER] = { "other", true },
};

const char *op_kind_name(enum op_kind k) { return (unsigned)k < OP_KINDS ? op_kinds[k].name : "?"; }
bool op_kind_common(enum op_kind k) { return (unsigned)k < OP_KINDS && op_kinds[k].common; }

/* The sum of every op time. */
static int64_t timed_ops(const struct op_times *t) {
    int64_t sum = 0;
    for (int k = 0; k < OP_KINDS; k++) sum += t->ns[k];
    return sum;
}

/* moex_embed's hook: the pass's rows after the output norm, summed. */
static void add_hidden(struct context *c, int n) {
    int D = c->m->hp.n_embd;
    rms_norm_rows(c->x, c->m->output_norm, c->xn, n, D, c->m->hp.rms_eps);
    for (int i = 0; i < n; i++)
        for (int d = 0; d < D; d++) c->hidden_sum[d] += c->xn[(size_t)i * D + d];
}

/* One forward pass of n tokens (at most n_batch) in runs, each at its
 * sequence's n_past; then kept. The forward pass's time that its blocks do
 * not count goes to `other`. */
static int eval_pass(struct context *c, const int32_t *tokens, struct batch_run *runs, int n_runs, int n,
                     float *logits, bool all_logits) {
    for (int r = 0; r < n_runs; r++) runs[r].pos0 = c->seqs[runs[r].seq].n_past;
    c->runs = runs;
    c->n_runs = n_runs;
    c->n_past = runs[0].pos0;
    c->layers = c->seqs[runs[0].seq].layers;
    int64_t t0 = time_ns(), counted = timed_ops(&c->times);
    /* One new token per sequence is a decode step, however many sequences
     * share the pass; any run of more is a prompt's. */
    moe_executor_begin_batch(c->exec, n == n_runs ? MOE_DECODE : MOE_PREFILL);
    int rc = c->m->arch->forward(c, tokens, n, logits, all_logits);
    if (rc) {
        /* A pass that stopped half way may have moved recurrent state. */
        for (int r = 0; r < n_runs && c->recurrent_total; r++) rewind_state(c, &c->seqs[runs[r].seq]);
    } else {
        if (c->hidden_sum) add_hidden(c, n);
        int64_t rest = time_ns() - t0 - (timed_ops(&c->times) - counted);
        if (rest > 0) c->times.ns[OP_OTHER] += rest;
        for (int r = 0; r < n_runs; r++) {
            struct sequence *q = &c->seqs[runs[r].seq];
            const int32_t *src = tokens + runs[r].first;
            if (src != q->tokens + q->n_past) memcpy(q->tokens + q->n_past, src, sizeof *src * (size_t)runs[r].n);
            q->n_past += runs[r].n;
            if (q->n_kept < q->n_past) q->n_kept = q->n_past;
        }
    }
    c->runs = NULL;
    c->n_runs = 0;
    return rc ? -1 : 0;
}

/* n tokens (at most n_batch) of one sequence as one pass. */
static int eval_batch(struct context *c, int seq, const int32_t *tokens, int n, float *logits, bool all_logits) {
    struct batch_run run = { .seq = seq, .first = 0, .n = n, .logits = true };
    return eval_pass(c, tokens, &run, 1, n, logits, all_logits);
}

/* Brings a sequence's state from n_past up to its kept tokens, then takes
 * the checkpoint asked for there. */
static int replay(struct context *c, int seq) {
    struct sequence *q = &c->seqs[seq];
    while (q->n_past < q->n_kept) {
        int chunk = q->n_kept - q->n_past < c->n_batch ? q->n_kept - q->n_past : c->n_batch;
        c->replayed += chunk;
        if (eval_batch(c, seq, q->tokens + q->n_past, chunk, NULL, true)) return -1;
    }
    if (q->checkpoint_wanted == q->n_past) save_checkpoint(c, q);
    return 0;
}

static int check_token(const struct context *c, int32_t id) {
    if (id < 0 || id >= c->m->hp.n_vocab)
        return moex_errorf("token id %d is out of range (vocabulary of %d)", id, c->m->hp.n_vocab);
    return 0;
}

int context_eval(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits) {
    const struct model_hparams *hp = &c->m->hp;
    struct sequence *q = &c->seqs[0];
    if (n <= 0) return moex_errorf("nothing to evaluate");
    if (q->n_kept + n > c->n_ctx)
        return moex_errorf("context is full: %d + %d tokens exceed the context of %d", q->n_kept, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (check_token(c, tokens[i])) return -1;
    if (replay(c, 0)) return -1;
    for (int done = 0; done < n;) {
        int chunk = n - done < c->n_batch ? n - done : c->n_batch;
        bool last = done + chunk == n;
        float *out = logits;
        if (logits && all_logits) out = logits + (size_t)done * hp->n_vocab;
        else if (!last) out = NULL;
        if (eval_batch(c, 0, tokens + done, chunk, out, all_logits || !last)) return -1;
        done += chunk;
    }
    return 0;
}

/* Evaluates the pass built in c->pass_tokens and c->run_buf, and hands each
 * run that wants them its logits: logits[run.seq]. */
static int flush_pass(struct context *c, int n_runs, int n, float *const *logits) {
    if (eval_pass(c, c->pass_tokens, c->run_buf, n_runs, n, c->run_logits, false)) return -1;
    size_t V = (size_t)c->m->hp.n_vocab;
    for (int r = 0, row = 0; r < n_runs; r++) {
        if (!c->run_buf[r].logits && n_runs > 1) continue;
        float *dst = logits && c->run_buf[r].logits ? logits[c->run_buf[r].seq] : NULL;
        if (dst) memcpy(dst, c->run_logits + row * V, V * 4);
        row++;
    }
    return 0;
}

int context_eval_seqs(struct context *c, const int32_t *tokens, const int32_t *seq_ids, int n, float *const *logits) {
    if (n <= 0) return moex_errorf("nothing to evaluate");
    memset(c->seq_left, 0, sizeof *c->seq_left * (size_t)c->n_seq);
    for (int i = 0; i < n; i++) {
        if (seq_ids[i] < 0 || seq_ids[i] >= c->n_seq)
            return moex_errorf("sequence id %d is out of range (%d sequences)", seq_ids[i], c->n_seq);
        if (check_token(c, tokens[i])) return -1;
        c->seq_left[seq_ids[i]]++;
    }
    for (int s = 0; s < c->n_seq; s++)
        if (c->seq_left[s] && c->seqs[s].n_kept + c->seq_left[s] > c->n_ctx)
            return moex_errorf("sequence %d is full: %d + %d tokens exceed the context of %d", s, c->seqs[s].n_kept,
                               c->seq_left[s], c->n_ctx);
    for (int s = 0; s < c->n_seq; s++)
        if (c->seq_left[s] && replay(c, s)) return -1;
    /* Sequence by sequence, each one's tokens in order; a pass that is full
     * goes, and a sequence that did not fit goes on in the next. */
    int pass_n = 0, n_runs = 0;
    for (int s = 0; s < c->n_seq; s++) {
        for (int scan = 0; c->seq_left[s] > 0;) {
            int take = c->seq_left[s] < c->n_batch - pass_n ? c->seq_left[s] : c->n_batch - pass_n;
            struct batch_run *r = &c->run_buf[n_runs++];
            *r = (struct batch_run){ .seq = s, .first = pass_n, .n = take };
            for (int k = 0; k < take; scan++)
                if (seq_ids[scan] == s) c->pass_tokens[pass_n + k++] = tokens[scan];
            pass_n += take;
            c->seq_left[s] -= take;
            r->logits = c->seq_left[s] == 0;
            if (pass_n == c->n_batch) {
                if (flush_pass(c, n_runs, pass_n, logits)) return -1;
                pass_n = n_runs = 0;
            }
        }
    }
    if (pass_n && flush_pass(c, n_runs, pass_n, logits)) return -1;
    return 0;
}
