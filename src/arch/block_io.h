/* The two ends of the network: token embedding and the output head. */
#ifndef MOEX_BLOCK_IO_H
#define MOEX_BLOCK_IO_H

#include <stdbool.h>
#include <stdint.h>

struct context;
struct matrix;
struct model;

/* Binds token_embd.weight (m->token_embd; sets m->hp.n_vocab from its
 * rows), the final norm of that name (m->output_norm), and output.weight,
 * or the embedding when the file has none (tied). 0, or -1 with moex_error(). */
int io_bind(struct model *m, const char *final_norm);

/* x[t] = row tokens[t] of the embedding, dequantized: (n, cols). */
void embed_tokens(const struct matrix *embd, const int32_t *tokens, int n, float *x);
/* The output norm and head over c->x's n rows: every row's logits when
 * all_logits (only when logits is given), else the last row's, into logits
 * or c->last_logits; in a pass of several runs (sequences), the last row of
 * each run that wants them, (runs wanting, n_vocab) into logits. Rows whose
 * logits are not wanted skip the head. */
void output_head(struct context *c, const float *norm, const struct matrix *head, int n, float *logits,
                 bool all_logits);

#endif
