/* Inside a context: what an architecture's forward pass reads and writes.
 * Only src/model/context.c and src/arch/ include this. */
#ifndef MOEX_CONTEXT_IMPL_H
#define MOEX_CONTEXT_IMPL_H

#include "model/model.h"

#include <stddef.h>

/* One layer's slice of the context's state (its model->state entry says
 * which parts it has; the others are NULL). */
struct layer_slice {
    void *k, *v;                /* (n_ctx, kv_k) and (n_ctx, kv_v) elements of kv_elem bytes */
    float *conv;                /* (conv_floats) */
    float *recurrent;           /* (recurrent_floats) */
};

struct context {
    struct model *m;
    struct threadpool *pool;
    int n_ctx, n_batch;
    int n_past;                 /* positions whose state is in place: the forward pass's first position */
    int n_kept;                 /* positions kept (>= n_past; more after a truncation that must replay) */
    int32_t *tokens;            /* (n_ctx) the tokens at positions 0..n_kept */
    enum kv_type kv_type;
    size_t kv_elem;             /* 2 (f16) or 4 (f32) */
    struct layer_slice *layers; /* (n_layers) */
    void *kv_mem;               /* every layer's KV cache */
    float *recurrent_mem;       /* every layer's conv and recurrent state: (recurrent_total) */
    size_t recurrent_total;
    float *checkpoint;          /* (recurrent_total) a copy of recurrent_mem at position checkpoint_pos */
    int checkpoint_pos;         /* -1: none */
    int checkpoint_wanted;      /* a checkpoint asked for at this position while replay is pending; -1: none */
    int64_t replayed;
    /* Scratch of one batch, shared by every architecture. */
    float *x;                   /* (n_batch, n_embd) residual stream */
    float *xn;                  /* (n_batch, n_embd) normalised input of a block */
    float *tmp;                 /* (n_batch, n_embd) block output */
    void *act;                  /* quantized activations of the widest matmul (n_batch rows) */
    size_t act_bytes;
    float *last_logits;         /* (n_vocab) */
    void *ws;                   /* the architecture's own buffers (arch->workspace_new) */
    struct moe_executor *exec;
    route_observer_fn on_route;
    void *route_user;
    struct op_times times;
};

#endif
