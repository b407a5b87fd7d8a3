/* Choosing the next token from logits: greedy, or temperature with top-k,
 * top-p and min-p filtering, and a repetition penalty; seeded. */
#ifndef MOEX_SAMPLER_H
#define MOEX_SAMPLER_H

#include "moex.h" /* struct moex_sampler_params */

#include <stdint.h>

void sampler_defaults(struct moex_sampler_params *p);

struct sampler;
struct sampler *sampler_new(const struct moex_sampler_params *p, int n_vocab);
void sampler_free(struct sampler *s);
/* Picks a token; logits may be modified (penalties). */
int32_t sampler_sample(struct sampler *s, float *logits);
/* Records a token of the context (for the repetition penalty). */
void sampler_accept(struct sampler *s, int32_t token);

/* Constrains the draws to a grammar (grammar.h; NULL: none), which s then
 * owns: its mask applies before the chain, and it advances with the token
 * accepted right after a draw (prompt tokens accepted before any draw leave
 * it alone). */
struct grammar_sampler;
void sampler_set_grammar(struct sampler *s, struct grammar_sampler *gs);

/* Index of the largest value (the first one on ties). */
int32_t argmax(const float *v, int n);

#endif
