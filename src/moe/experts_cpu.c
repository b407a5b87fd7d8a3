#include "moe/experts.h"

#include "core/spin.h"
#include "core/threadpool.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Rows of an expert's weights per work item: small enough that the items of
 * a decode step (8 experts) still spread over the threads; a multiple of the
 * interleaved groups (QUANT_R16_ROWS). */
enum { ITEM_ROWS = 32 };
/* Tokens per quantizing item of the gate/up job (prefill). */
enum { QUANT_ITEM_TOKENS = 8 };
/* Items a thread claims at a time, prefill. The pool's chunks (an eighth of
 * the items with 2 threads: ~16 experts' gate/up) let a thread that ran out
 * of gate/up items wait for the hidden rows of experts whose gate/up items
 * the other thread still had to run (up to 12% of the job at pp512); claims
 * of a few items leave it those items to run instead. Decode streams the
 * weights from memory and keeps the pool's chunks: claims of 2 items (64
 * rows) interleave the threads' streams and cost 0.88x the tokens/s at 48
 * layers. */
enum { CLAIM_ITEMS = 2 };

struct expert_item { int expert, row0, rows; };

/* items_left of an expert once its hidden rows are quantized. */
enum { HIDDEN_READY = -1 };

struct moe_scratch {
    int max_pairs;              /* max_tokens * top_k */
    int n_expert;
    int *expert_count;          /* (n_expert) rows routed to each expert */
    int *expert_start;          /* (n_expert + 1) first pair of each expert */
    int *pair_token;            /* (pairs) token of each pair, grouped by expert */
    int *pair_of;               /* (max_tokens * top_k) pair index of (token, k) */
    char *xq;                   /* (max_tokens, act row) input quantized once */
    char *xq_sorted;            /* (pairs, act row) gathered by expert */
    float *gate_out, *up_out;   /* (pairs, n_ff) */
    char *hq;                   /* (pairs, down act row) silu(gate)*up quantized */
    float *down_out;            /* (pairs, n_embd) */
    size_t x_act_bytes, h_act_bytes;
    struct expert_item *items;  /* (max_items) the gate/up items, then the down items */
    int max_items;
    int *cpu_pairs;             /* (max_pairs) pairs of the experts on the CPU this batch */
    int n_cpu_pairs;
    bool *pair_on_cpu;          /* (max_pairs) whether a pair's expert runs on the CPU this batch */
    _Atomic int *token_ready;   /* (max_tokens) a token's row quantized and gathered (gate/up job) */
    _Atomic int *items_left;    /* (n_expert) gate/up items of an expert still running, then HIDDEN_READY */
    int n_tokens, top_k, n_embd; /* of the current batch */
};

static void *grab(size_t n, int *failed) {
    void *p = malloc(n ? n : 1);
    if (!p) *failed = 1;
    return p;
}

struct moe_scratch *moe_scratch_new(const struct expert_layer *shape, int max_tokens, int top_k) {
    struct moe_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    int failed = 0;
    size_t pairs = (size_t)max_tokens * top_k;
    s->max_pairs = (int)pairs;
    s->n_expert = shape->n_expert;
    /* Largest activation rows any supported type needs (F32 is the widest). */
    s->x_act_bytes = (size_t)shape->n_embd * 4 + 64;
    s->h_act_bytes = (size_t)shape->n_ff * 4 + 64;
    s->expert_count = grab(sizeof(int) * shape->n_expert, &failed);
    s->cpu_pairs = grab(sizeof(int) * pairs, &failed);
    s->pair_on_cpu = grab(sizeof(bool) * pairs, &failed);
    s->token_ready = grab(sizeof(_Atomic int) * (size_t)max_tokens, &failed);
    s->items_left = grab(sizeof(_Atomic int) * (size_t)shape->n_expert, &failed);
    s->n_embd = shape->n_embd;
    s->expert_start = grab(sizeof(int) * (shape->n_expert + 1), &failed);
    s->pair_token = grab(sizeof(int) * pairs, &failed);
    s->pair_of = grab(sizeof(int) * pairs, &failed);
    s->xq = grab(s->x_act_bytes * max_tokens, &failed);
    s->xq_sorted = grab(s->x_act_bytes * pairs, &failed);
    s->gate_out = grab(sizeof(float) * pairs * shape->n_ff, &failed);
    s->up_out = grab(sizeof(float) * pairs * shape->n_ff, &failed);
    s->hq = grab(s->h_act_bytes * pairs, &failed);
    s->down_out = grab(sizeof(float) * pairs * shape->n_embd, &failed);
    s->max_items = shape->n_expert * ((shape->n_ff + ITEM_ROWS - 1) / ITEM_ROWS + (shape->n_embd + ITEM_ROWS - 1) / ITEM_ROWS);
    s->items = grab(sizeof *s->items * (size_t)s->max_items, &failed);
    if (failed) {
        moe_scratch_free(s);
        return NULL;
    }
    return s;
}

void moe_scratch_free(struct moe_scratch *s) {
    if (!s) return;
    free(s->expert_count); free(s->cpu_pairs); free(s->pair_on_cpu); free((void *)s->token_ready);
    free((void *)s->items_left); free(s->expert_start); free(s->pair_token); free(s->pair_of);
    free(s->xq); free(s->xq_sorted); free(s->gate_out); free(s->up_out); free(s->hq);
    free(s->down_out); free(s->items);
    free(s);
}

/* The experts' one job: (prefill) quantizing the tokens and copying them
 * to their pairs, QUANT_ITEM_TOKENS tokens a claim off next_q, which every
 * thread drains before its first expert item; then the gate/up items, then
 * the down items, CLAIM_ITEMS a claim off next_item. A gate/up item waits
 * for its expert's tokens only; the last gate/up item of an expert to finish
 * quantizes its hidden rows (items_left), and a down item waits for its
 * expert's. Items are claimed in order, so the lowest unfinished item that
 * was taken waits for nothing unfinished, and quantizing waits for nothing:
 * no deadlock. */
struct stage_job {
    const struct expert_layer *layer;
    struct moe_scratch *s;
    int n_pairs;
    size_t x_stride, h_stride;
    enum qtype x_act, down_act;
    const float *x;             /* (n_tokens, n_embd) to quantize in the job, or NULL: done */
    int q_items, n_gate_up, n_items, claim;
    _Atomic int next_q;         /* the next quantizing claim */
    _Atomic int next_item;      /* the next item claim */
};

/* Token t's row of x quantized, and copied to its pairs on the CPU. */
static void quantize_token(const struct stage_job *j, int t) {
    struct moe_scratch *s = j->s;
    char *row = s->xq + (size_t)t * j->x_stride;
    quant_quantize_act(j->x_act, j->x + (size_t)t * j->layer->n_embd, row, j->layer->n_embd);
    for (int k = 0; k < s->top_k; k++) {
        int p = s->pair_of[t * s->top_k + k];
        if (s->pair_on_cpu[p]) memcpy(s->xq_sorted + (size_t)p * j->x_stride, row, j->x_stride);
    }
}

static void quantize_hidden(const struct stage_job *j, int p0, int n) {
    for (int p = p0; p < p0 + n; p++)
        quant_quantize_act(j->down_act, j->s->gate_out + (size_t)p * j->layer->n_ff, j->s->hq + (size_t)p * j->h_stride,
                           j->layer->n_ff);
}

/* Stage 1: gate and up of the item's rows of one expert, then silu(g)*u. */
static void gate_up_item(const struct stage_job *j, const struct expert_item *item) {
    const struct expert_layer *L = j->layer;
    struct moe_scratch *s = j->s;
    int e = item->expert, row0 = item->row0, rows = item->rows;
    int p0 = s->expert_start[e], n = s->expert_count[e];
    unsigned spins = 0;
    if (j->x)
        for (int p = p0; p < p0 + n; p++)
            while (!atomic_load_explicit(&s->token_ready[s->pair_token[p]], memory_order_acquire)) spin_pause(&spins);
    const char *act = s->xq_sorted + (size_t)p0 * j->x_stride;
    int64_t wrow = (int64_t)e * L->n_ff + row0;
    float *g = s->gate_out + (size_t)p0 * L->n_ff + row0;
    float *u = s->up_out + (size_t)p0 * L->n_ff + row0;
    matrix_tile(L->gate, wrow, rows, act, j->x_stride, n, g, (size_t)L->n_ff);
    matrix_tile(L->up, wrow, rows, act, j->x_stride, n, u, (size_t)L->n_ff);
    for (int r = 0; r < n; r++) {
        float *gr = g + (size_t)r * L->n_ff, *ur = u + (size_t)r * L->n_ff;
        silu_mul_row(gr, ur, rows);
    }
    if (atomic_fetch_sub_explicit(&s->items_left[e], 1, memory_order_acq_rel) == 1) {
        quantize_hidden(j, p0, n);
        atomic_store_explicit(&s->items_left[e], HIDDEN_READY, memory_order_release);
    }
}

/* Stage 2: down of the item's rows of one expert, once its hidden rows
 * are quantized. */
static void down_item(const struct stage_job *j, const struct expert_item *item) {
    const struct expert_layer *L = j->layer;
    struct moe_scratch *s = j->s;
    int e = item->expert, p0 = s->expert_start[e], n = s->expert_count[e];
    unsigned spins = 0;
    while (atomic_load_explicit(&s->items_left[e], memory_order_acquire) != HIDDEN_READY) spin_pause(&spins);
    matrix_tile(L->down, (int64_t)e * L->n_embd + item->row0, item->rows, s->hq + (size_t)p0 * j->h_stride,
                j->h_stride, n, s->down_out + (size_t)p0 * L->n_embd + item->row0, (size_t)L->n_embd);
}

static void stage_items(void *arg, int thread_index, int n_threads) {
    (void)thread_index;
    (void)n_threads;
    struct stage_job *j = arg;
    struct moe_scratch *s = j->s;
    for (int q; j->x && (q = atomic_fetch_add_explicit(&j->next_q, 1, memory_order_relaxed)) < j->q_items;) {
        int t1 = (q + 1) * QUANT_ITEM_TOKENS < s->n_tokens ? (q + 1) * QUANT_ITEM_TOKENS : s->n_tokens;
        for (int t = q * QUANT_ITEM_TOKENS; t < t1; t++) {
            quantize_token(j, t);
            atomic_store_explicit(&s->token_ready[t], 1, memory_order_release);
        }
    }
    for (int begin; (begin = atomic_fetch_add_explicit(&j->next_item, j->claim, memory_order_relaxed)) < j->n_items;)
        for (int it = begin; it < begin + j->claim && it < j->n_items; it++) {
            if (it < j->n_gate_up) gate_up_item(j, &s->items[it]);
            else down_item(j, &s->items[it]);
        }
}

/* Work items of n_rows rows of each expert with rows (on the CPU), from
 * items[n] on; with left, each expert's count of them. Returns the items'
 * end. */
static int make_items(struct moe_scratch *s, int n, int n_rows, const bool *on_cpu, _Atomic int *left) {
    for (int e = 0; e < s->n_expert; e++) {
        if (!s->expert_count[e] || (on_cpu && !on_cpu[e])) continue;
        int first = n;
        for (int r = 0; r < n_rows; r += ITEM_ROWS) {
            s->items[n].expert = e;
            s->items[n].row0 = r;
            s->items[n].rows = n_rows - r < ITEM_ROWS ? n_rows - r : ITEM_ROWS;
            n++;
        }
        if (left) atomic_store_explicit(&left[e], n - first, memory_order_relaxed);
    }
    return n;
}

void moe_group(struct moe_scratch *s, int n_tokens, int top_k, const int32_t *ids) {
    int n_pairs = n_tokens * top_k;
    /* A counting sort keeps token order within an expert, so results do not
     * depend on thread timing. */
    memset(s->expert_count, 0, sizeof(int) * s->n_expert);
    for (int p = 0; p < n_pairs; p++) s->expert_count[ids[p]]++;
    s->expert_start[0] = 0;
    for (int e = 0; e < s->n_expert; e++) s->expert_start[e + 1] = s->expert_start[e] + s->expert_count[e];
    int *fill = s->expert_count; /* reused as a cursor, restored below */
    for (int e = 0; e < s->n_expert; e++) fill[e] = s->expert_start[e];
    for (int p = 0; p < n_pairs; p++) {
        int slot = fill[ids[p]]++;
        s->pair_token[slot] = p / top_k;
        s->pair_of[p] = slot;
    }
    for (int e = 0; e < s->n_expert; e++) s->expert_count[e] = s->expert_start[e + 1] - s->expert_start[e];
    s->n_tokens = n_tokens;
    s->top_k = top_k;
}

int moe_expert_rows(const struct moe_scratch *s, int expert) { return s->expert_count[expert]; }
int moe_expert_first_pair(const struct moe_scratch *s, int expert) { return s->expert_start[expert]; }
int moe_pair_token(const struct moe_scratch *s, int pair) { return s->pair_token[pair]; }
float *moe_pair_output(struct moe_scratch *s, int pair) { return s->down_out + (size_t)pair * s->n_embd; }

void moe_compute_cpu(struct threadpool *pool, const struct expert_layer *L, struct moe_scratch *s, const float *x,
                     const bool *on_cpu) {
    /* Only reads the grouping: a device may work on the other experts'
     * pairs at the same time. */
    s->n_cpu_pairs = 0;
    for (int e = 0; e < L->n_expert; e++) {
        bool cpu = !on_cpu || on_cpu[e];
        for (int p = s->expert_start[e]; p < s->expert_start[e] + s->expert_count[e]; p++) {
            s->pair_on_cpu[p] = cpu;
            if (cpu) s->cpu_pairs[s->n_cpu_pairs++] = p;
        }
    }
    if (!s->n_cpu_pairs) return;
    enum qtype x_act = quant_traits(L->gate->type)->vec_dot_type, down_act = quant_traits(L->down->type)->vec_dot_type;
    struct stage_job job = { L, s, s->n_cpu_pairs, quant_row_size(x_act, L->n_embd), quant_row_size(down_act, L->n_ff),
                             x_act, down_act, NULL, 0, 0, 0, 0, 0, 0 };
    /* Each token quantized once, and copied to its pairs: in the gate/up
     * job for several tokens on several threads, else before it. */
    if (threadpool_size(pool) > 1 && s->n_tokens > 4) {
        job.x = x;
        job.q_items = (s->n_tokens + QUANT_ITEM_TOKENS - 1) / QUANT_ITEM_TOKENS;
        for (int t = 0; t < s->n_tokens; t++) atomic_init(&s->token_ready[t], 0);
    } else {
        job.x = x;
        for (int t = 0; t < s->n_tokens; t++) quantize_token(&job, t);
        job.x = NULL;
    }
    job.n_gate_up = make_items(s, 0, L->n_ff, on_cpu, s->items_left);
    job.n_items = make_items(s, (int)job.n_gate_up, L->n_embd, on_cpu, NULL);
    job.claim = s->n_tokens > 4 ? CLAIM_ITEMS : (int)threadpool_chunk(pool, job.n_items, 1);
    threadpool_run(pool, stage_items, &job);
}

void moe_combine(const struct moe_scratch *s, const float *weights, float *out) {
    int top_k = s->top_k, D = s->n_embd;
    /* Weighted sum in k order, as the reference implementation adds them. */
    for (int t = 0; t < s->n_tokens; t++) {
        float *o = out + (size_t)t * D;
        for (int k = 0; k < top_k; k++) {
            const float *d = s->down_out + (size_t)s->pair_of[t * top_k + k] * D;
            float w = weights[t * top_k + k];
            if (k == 0)
                for (int i = 0; i < D; i++) o[i] = d[i] * w;
            else
                for (int i = 0; i < D; i++) o[i] += d[i] * w;
        }
    }
}
