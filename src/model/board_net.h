/* A model's forward pass as the board model (dev/board.h) prices it: the
 * dense matmuls of each layer, split into the token mixer's and the FFN's,
 * each layer's kind, the attention shape and the lm head. The experts are
 * priced per layer by the executor (board_moe_ns). Built from a model's
 * tensors, or by hand in tests. */
#ifndef MOEX_BOARD_NET_H
#define MOEX_BOARD_NET_H

#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

struct board;

struct board_matmul {
    int layer;     /* -1: the lm head */
    bool ffn;      /* of the layer's FFN (router, shared expert, dense FFN), else of its mixer */
    int64_t K, N;  /* N rows of K values */
    enum qtype type;
};

struct board_net {
    int n_layers;
    enum layer_kind *mixer;  /* (n_layers) */
    bool *moe;               /* (n_layers) the FFN is routed experts */
    int n_head, key_dim, value_dim;
    struct board_matmul *mm; /* (n_mm) every dense matmul of the layers */
    int n_mm;
    struct board_matmul head;
};

/* -1 with moex_error() when out of memory. */
int board_net_from_model(const struct model *m, struct board_net *out);
void board_net_free(struct board_net *n);

/* n tokens at positions n_past.. through every layer's dense matmuls and
 * attention and the lm head (all rows when all_logits, else the last), on
 * the board's CPU, or on its NPU where dense_npu is set and that is faster;
 * each layer's ops times its kind's count in the predicted model (ns). */
double board_net_ns(const struct board *b, const struct board_net *n, int n_tokens, int n_past, bool all_logits);

#endif
