/* The reference run of `moex perplexity --kl-divergence-base FILE`: the
 * tokens and, per scored position, the most likely tokens' log-probabilities
 * and the rest's mass (docs/quality.md gives the layout). Errors are printed
 * ("moex: ...") and -1 returned. */
#ifndef MOEX_KL_BASE_H
#define MOEX_KL_BASE_H

#include "moex_tools.h"

#include <stdint.h>
#include <stdio.h>

#define KL_BASE_MAGIC "MOEXKLB1"

/* One scored position. */
struct kl_base_pos {
    float nll;            /* -log p(the next token) */
    float log_rest;       /* log of the mass outside ids[]; -INFINITY when none */
    int32_t *ids;         /* (top) most likely first */
    float *logp;          /* (top) their log-probabilities */
};

struct kl_base_writer {
    moex_file *f;
    const char *path;
    int n_vocab, top;
    int32_t *ids;         /* (top) */
    float *vals;          /* (top) logits, then log-probabilities */
    uint8_t *in_top;      /* (n_vocab) */
    unsigned char *record;
};

struct kl_base_reader {
    FILE *f;
    const char *path;
    int n_ctx, n_vocab, n_chunk, top;
    int32_t *tokens;      /* (n_chunk, n_ctx) */
    struct kl_base_pos pos;
    unsigned char *record;
};

/* Opens the output (nothing is written until kl_base_commit). */
int kl_base_create(struct kl_base_writer *w, const char *path);
/* The header and the tokens. */
int kl_base_begin(struct kl_base_writer *w, int n_ctx, int n_vocab, int n_chunk, int top, const int32_t *tokens);
/* One scored position: its logits, their max and log sum exp(l - max), the next token's nll. */
int kl_base_put(struct kl_base_writer *w, const float *logits, float max_logit, double log_sum, float nll);
int kl_base_commit(struct kl_base_writer *w);
/* Removes an uncommitted output and frees; a zeroed writer is fine. */
void kl_base_discard(struct kl_base_writer *w);

/* Reads and checks the header and the tokens; the size must be the one they imply. */
int kl_base_open(struct kl_base_reader *r, const char *path);
/* The next position into *pos (its arrays are the reader's). */
int kl_base_next(struct kl_base_reader *r, struct kl_base_pos *pos);
void kl_base_close(struct kl_base_reader *r);

#endif
