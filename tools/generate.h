/* The generation loop shared by `run` and `chat`. */
#ifndef MOEX_GENERATE_H
#define MOEX_GENERATE_H

#include "session.h"
#include "text/sampler.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct sampler_opts {
    struct sampler_params params;
};

void sampler_opts_defaults(struct sampler_opts *o);
/* As session_opts_parse, for --temp --top-k --top-p --min-p --repeat-penalty
 * --repeat-last-n --seed. */
int sampler_opts_parse(struct sampler_opts *o, int argc, char **argv, int *i);
void sampler_opts_help(FILE *out);

struct generate_result {
    int n_prompt, n_generated;
    double prompt_s, generate_s;
    bool stopped_at_eog;
};

/* Evaluates the prompt ids (appended to what the context holds), then
 * samples up to n_predict tokens, streaming text to `text_out` (when the
 * model has a tokenizer) and ids to `ids_out` (when not NULL). Generated ids
 * are stored in `generated` when not NULL (capacity n_predict). Stops at an
 * end-of-generation token unless ignore_eos. -1 on error (printed). */
int generate(struct session *s, struct sampler *smp, const int32_t *prompt, int n_prompt, int n_predict,
             bool ignore_eos, FILE *text_out, FILE *ids_out, int32_t *generated, struct generate_result *r);

/* "moex: LABEL N tokens in S s (R t/s), generated N tokens in S s (R t/s)":
 * no rate where it would mean nothing (the first generated token comes with
 * the prompt's logits, so a generation rate needs two). */
void generate_report(FILE *out, const char *label, const struct generate_result *r);

#endif
