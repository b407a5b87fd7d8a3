/* The generation loop shared by `run` and `chat`. */
#ifndef MOEX_GENERATE_H
#define MOEX_GENERATE_H

#include "session.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct sampler_opts {
    struct moex_sampler_params params;
    bool seed_set;                   /* -s/--seed N with N >= 0; unset or -1: a random seed */
};

void sampler_opts_defaults(struct sampler_opts *o);
/* As session_opts_parse, for --temp --top-k --top-p --min-p --repeat-penalty
 * --repeat-last-n -s/--seed. */
int sampler_opts_parse(struct sampler_opts *o, int argc, char **argv, int *i);
/* After the command line: an unset seed (or -1) becomes a random one, said
 * on stderr ("moex: seed N") when the sampling is random (temperature > 0). */
void sampler_opts_finish(struct sampler_opts *o);
void sampler_opts_help(FILE *out);

/* Text options as llama.cpp takes them: -e/--escape (default) turns \n, \t,
 * \r, \\, \', \", \a, \b, \f, \v and \xHH into the characters they
 * name, in place; --no-escape leaves the text as typed. */
void text_unescape(char *s);
/* -n N: N >= 0 tokens, -1 until an end of generation or a full context
 * (*n = INT32_MAX, bounded by the context where it is used). */
int parse_n_predict(const char *v, int64_t min, int64_t *n);

/* A flag (set by a signal handler) that stops generate() at the next token
 * when non-zero: the generation then finishes as MOEX_FINISH_CALLBACK. NULL: none. */
void generate_stop_on(const volatile sig_atomic_t *flag);

/* moex_generate (the context keeps what it shares with the prompt and
 * evaluates the rest), streaming text to `text_out` (when the model has a
 * tokenizer) and ids to `ids_out` (when not NULL). Generated ids are stored
 * in `generated` when not NULL (capacity n_predict). checkpoint_at: as
 * moex_generate_params.checkpoint_at. Stops at an
 * end-of-generation token unless ignore_eos; says so where the context is
 * full. -1 on error (printed). */
int generate(struct session *s, moex_sampler *smp, const int32_t *prompt, int n_prompt, int checkpoint_at,
             int n_predict, bool ignore_eos, FILE *text_out, FILE *ids_out, int32_t *generated,
             struct moex_generate_result *r);

/* "moex: LABEL N tokens in S s (R t/s), generated N tokens in S s (R t/s)",
 * N the prompt tokens evaluated: no rate where it would mean nothing (the
 * first generated token comes with the prompt's logits, so a generation rate
 * needs two). */
void generate_report(FILE *out, const char *label, const struct moex_generate_result *r);

#endif
