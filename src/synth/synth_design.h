/* The weights of a synthetic model, one row at a time. The residual stream
 * is split into four sets of coordinates (chosen at random per model):
 *   U  holds one fixed direction u0 that every token carries: it gives the
 *      attention heads constant queries and keys, and the router its
 *      per-expert static logits (the Zipf skew);
 *   F  holds the current token's own random features (fast);
 *   S  is written by the attention layers, whose q/k norms turn RoPE into a
 *      fixed window over recent positions: short heads average the last few
 *      dozen tokens' F, long heads the whole past, and S gets short minus
 *      long (slow, zero-mean): the source of routing locality;
 *   J  is written by the experts and read by the output head only.
 * Per-layer scales follow a small energy model of the residual, and every
 * router row is scaled, for the actual weights, so that each expert sees
 * exactly the requested fast/slow mix. docs/synth.md has the derivation.
 * Rows are generated independently from (seed, tensor, row), so any split of
 * the work gives the same bytes. */
#ifndef MOEX_SYNTH_DESIGN_H
#define MOEX_SYNTH_DESIGN_H

#include "synth/synth.h"

#include <stdint.h>

enum synth_kind {
    SK_OUTPUT, SK_OUTPUT_NORM, SK_TOKEN_EMBD,
    /* per layer, in the order llama.cpp's files list them */
    SK_ATTN_K, SK_ATTN_K_NORM, SK_ATTN_NORM, SK_ATTN_OUTPUT, SK_ATTN_Q, SK_ATTN_Q_NORM, SK_ATTN_V,
    SK_FFN_DOWN_EXPS, SK_FFN_GATE_EXPS, SK_FFN_GATE_INP, SK_FFN_NORM, SK_FFN_UP_EXPS,
    SK_COUNT,
};
#define SK_FIRST_LAYER_KIND SK_ATTN_K

struct synth_design;

/* token_types: (n_vocab) token types, kept by the design (unused tokens get
 * a strongly negative output logit). NULL with moex_error() on failure. */
struct synth_design *synth_design_new(const struct synth_params *p, int n_vocab, const int32_t *token_types);
void synth_design_free(struct synth_design *d);

/* GGUF name ("blk.%d.attn_q.weight") and shape of a tensor. */
void synth_kind_name(enum synth_kind k, int layer, char *out, int out_size);
int synth_kind_shape(const struct synth_params *p, int n_vocab, enum synth_kind k, int64_t ne[3]);

/* Writes row `row` (of ne[1] * ne[2] rows) of the tensor to out[0..ne[0]). */
void synth_design_row(const struct synth_design *d, enum synth_kind k, int layer, int64_t row, float *out);

/* n Gaussian values times scale, from (seed, stream, row) alone: rows of the
 * tensors an architecture has beyond the design's (streams from
 * SYNTH_STREAM_EXTRA on, distinct per tensor and layer). */
#define SYNTH_STREAM_EXTRA (1ull << 40)
void synth_noise_row(const struct synth_design *d, uint64_t stream, int64_t row, float scale, float *out, int64_t n);

/* The static router logit of each popularity rank (units of the router's
 * noise), as calibrated; for tests and docs. */
const float *synth_design_rank_logits(const struct synth_design *d);

#endif
