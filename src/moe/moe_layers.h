/* What the executor sees of a model: its MoE layers, in order, and its dense
 * matmuls. Layers without experts (dense FFN layers) are absent from the MoE
 * list; routing statistics, pack files and the executor's layer argument
 * index that list, not the model's layers. The dense matmuls (attention
 * projections, shared experts, dense FFN layers, the lm head) go through the
 * same placement as experts. Data flows one way: the architecture describes
 * its layers here, the executor never sees the architecture. */
#ifndef MOEX_MOE_LAYERS_H
#define MOEX_MOE_LAYERS_H

#include "quant/matmul.h"

struct gguf_file;

struct moe_layer_desc {
    int layer;                       /* the model's layer index (for messages) */
    int n_expert, n_used, n_ff, n_embd;
    struct matrix gate, up;          /* stacks: expert e's n_ff rows start at row e*n_ff */
    struct matrix down;              /* stack: expert e's n_embd rows start at row e*n_embd */
};

/* What a dense matmul is, for placement reports. */
enum dense_kind {
    DENSE_ATTN_Q, DENSE_ATTN_K, DENSE_ATTN_V, DENSE_ATTN_O,
    DENSE_SHARED_EXPERT,             /* gate, up, down of a shared expert */
    DENSE_FFN,                       /* gate, up, down of a dense FFN layer */
    DENSE_LM_HEAD,
    DENSE_SHORTCONV,                 /* in and out projections of a short-convolution layer */
    DENSE_DELTA_NET,                 /* qkv, output gate (z) and output projections of a delta net */
    DENSE_KINDS,
};
const char *dense_kind_name(enum dense_kind k);

struct dense_desc {
    enum dense_kind kind;
    int layer;                       /* the model's layer; -1 for the lm head */
    const struct matrix *w;          /* (N = rows outputs, K = cols inputs), owned by the model */
};

struct moe_model_desc {
    int n_layers;                    /* MoE layers */
    const struct moe_layer_desc *layers; /* (n_layers), owned by the model */
    const struct gguf_file *file;    /* the weights' file: the identity pack files are tied to */
    int n_dense;                     /* dense matmuls, in the order the backbone is made resident */
    const struct dense_desc *dense;  /* (n_dense), owned by the model */
};

/* 0 when every MoE layer has the first one's shape and types (the executor's
 * slots and pack files assume one shape); else -1 with moex_error(). */
int moe_model_check(const struct moe_model_desc *d);

#endif
