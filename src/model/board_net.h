/* A model's forward pass described for the board model (dev/board.h,
 * struct board_net): built from a model's tensors, or by hand in tests. */
#ifndef MOEX_BOARD_NET_H
#define MOEX_BOARD_NET_H

#include "dev/board.h"
#include "model/model.h"

/* -1 with moex_error() when out of memory. */
int board_net_from_model(const struct model *m, struct board_net *out);
void board_net_free(struct board_net *n);

#endif
