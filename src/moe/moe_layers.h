/* What the expert executor sees of a model: its MoE layers, in order. Layers
 * without experts (dense FFN layers) are absent; routing statistics, pack
 * files and the executor's layer argument index this list, not the model's
 * layers. Data flows one way: the architecture describes its layers here,
 * the executor never sees the architecture. */
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

struct moe_model_desc {
    int n_layers;                    /* MoE layers */
    const struct moe_layer_desc *layers; /* (n_layers), owned by the model */
    const struct gguf_file *file;    /* the weights' file: the identity pack files are tied to */
};

/* 0 when every MoE layer has the first one's shape and types (the executor's
 * slots and pack files assume one shape); else -1 with moex_error(). */
int moe_model_check(const struct moe_model_desc *d);

#endif
