/* Choosing the next token from logits: greedy, or temperature with top-k,
 * top-p and min-p filtering, and a repetition penalty; seeded. */
#ifndef MOEX_SAMPLER_H
#define MOEX_SAMPLER_H

#include "moex.h" /* struct moex_sampler_params */

#include <stdint.h>

void sampler_defaults(struct moex_sampler_params *p);

/* The longest window the repetition penalty looks back over. */
#define SAMPLER_MAX_LAST_N (1 << 20)

struct sampler;
/* NULL with an error for parameters out of range (repeat_last_n above
 * SAMPLER_MAX_LAST_N, NaN, a penalty <= 0) or out of memory. */
struct sampler *sampler_new(const struct moex_sampler_params *p, int n_vocab);
void sampler_free(struct sampler *s);
/* Picks a token; logits may be modified (penalties). */
int32_t sampler_sample(struct sampler *s, float *logits);
/* The OpenAI API's presence and frequency penalties (each in [-2, 2]; 0:
 * off), over the tokens this sampler drew, and logit biases added at every
 * draw; both before the repetition penalty. -1 on a bad value. */
int sampler_set_penalties(struct sampler *s, float presence, float frequency);
int sampler_set_logit_bias(struct sampler *s, const int32_t *ids, const float *bias, int n);
/* Records a token of the context (for the repetition penalty); an id
 * outside the vocabulary is not recorded: -1 with an error. */
int sampler_accept(struct sampler *s, int32_t token);

/* Constrains the draws to a grammar (grammar.h; NULL: none), which s then
 * owns: its mask applies before the chain, and it advances with the token
 * accepted right after a draw (prompt tokens accepted before any draw leave
 * it alone). */
struct grammar_sampler;
void sampler_set_grammar(struct sampler *s, struct grammar_sampler *gs);

/* Index of the largest value (the first one on ties). */
int32_t argmax(const float *v, int n);

#endif
