/* Inside a context: what an architecture's forward pass reads and writes.
 * Only src/model/context.c and src/arch/ include this. */
#ifndef MOEX_CONTEXT_IMPL_H
#define MOEX_CONTEXT_IMPL_H

#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>

/* One layer's slice of a sequence's state (its model->state entry says
 * which parts it has; the others are NULL). */
struct layer_slice {
    void *k, *v;                /* (n_ctx, kv_k) and (n_ctx, kv_v) elements of kv_elem bytes */
    float *conv;                /* (conv_floats) */
    float *recurrent;           /* (recurrent_floats) */
};

/* One sequence of a context: its tokens, its state, its checkpoint. */
struct sequence {
    int n_past;                 /* positions whose state is in place: where its next pass starts */
    int n_kept;                 /* positions kept (>= n_past; more after a truncation that must replay) */
    int32_t *tokens;            /* (n_ctx) the tokens at positions 0..n_kept */
    struct layer_slice *layers; /* (n_layers) */
    float *recurrent;           /* every layer's conv and recurrent state: (recurrent_total) */
    float *checkpoint;          /* (recurrent_total) a copy of recurrent at position checkpoint_pos */
    int checkpoint_pos;         /* -1: none */
    int checkpoint_wanted;      /* a checkpoint asked for at this position while replay is pending; -1: none */
};

/* Consecutive tokens of a forward pass that belong to one sequence, in
 * order: rows first..first+n-1 of the pass, at positions pos0..pos0+n-1 of
 * that sequence. A pass holds at most one run per sequence. */
struct batch_run {
    int seq;                    /* index into c->seqs */
    int first, n;
    int pos0;
    bool logits;                /* its last token's logits are wanted (multi-run passes) */
};

struct context {
    struct model *m;
    struct threadpool *pool;
    int n_ctx, n_batch;
    int n_seq;
    struct sequence *seqs;      /* (n_seq) */
    /* The pass being evaluated: its runs (a single-sequence pass has one),
     * and the first run's start and state, which is all a single-sequence
     * block (attention(), tests' forward passes) reads. */
    const struct batch_run *runs;
    int n_runs;
    int n_past;                 /* runs[0].pos0 */
    struct layer_slice *layers; /* (n_layers) runs[0]'s sequence's */
    enum kv_type kv_type;
    size_t kv_elem;             /* 2 (f16) or 4 (f32) */
    void *kv_mem;               /* every sequence's and layer's KV cache */
    float *recurrent_mem;       /* every sequence's conv and recurrent state, then their checkpoints */
    size_t recurrent_total;     /* floats of one sequence's conv and recurrent state */
    int64_t replayed;
    /* Scratch of one batch, shared by every architecture. */
    float *x;                   /* (n_batch, n_embd) residual stream */
    float *xn;                  /* (n_batch, n_embd) normalised input of a block */
    float *tmp;                 /* (n_batch, n_embd) block output */
    void *act;                  /* quantized activations of the widest matmul (n_batch rows) */
    size_t act_bytes;
    float *last_logits;         /* (n_vocab) */
    /* Multi-sequence passes (n_seq > 1). */
    struct batch_run *run_buf;  /* (n_seq) */
    int *seq_left;              /* (n_seq) tokens of each sequence not yet in a pass */
    int32_t *pass_tokens;       /* (n_batch) the pass's tokens, grouped by sequence */
    float *run_logits;          /* (min(n_seq, n_batch), n_vocab) the last token of each run */
    void *ws;                   /* the architecture's own buffers (arch->workspace_new) */
    struct moe_executor *exec;
    route_observer_fn on_route;
    void *route_user;
    struct op_times times;
    float *hidden_sum;          /* (n_embd) when set: each evaluated row's final hidden state (after the
                                   output norm) is added here (moex_embed, api_embed.c) */
};

#endif
