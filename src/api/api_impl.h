/* What the public handles of include/moex.h hold: the internals they wrap.
 * Only src/api/ reads them. */
#ifndef MOEX_API_IMPL_H
#define MOEX_API_IMPL_H

#include "moex.h"

#include "core/error.h"
#include "model/model.h"
#include "moe/executor.h"

#include <stdio.h>

struct board_net;
struct grammar_vocab;
struct trace;
struct threadpool;

struct moex_model {
    struct model *model;
    struct threadpool *pool;
    struct moe_exec_options experts;   /* from moex_device_params; strings owned below */
    char *path, *stats_path, *sim_figures, *pack_path;
    moex_log_fn log;
    moex_progress_fn progress;
    void *user;
    bool counted;                      /* in api_model_loaded's count */
    bool note_said;                    /* the executor's start-up note was logged (once per model) */
    bool interleave_said;              /* the interleaved layout's pack file note was logged */
    _Atomic(struct grammar_vocab *) grammar_vocab; /* the token trie of grammars, made on first use (api_grammar.c) */
};

struct moex_context {
    moex_model *m;
    struct context *ctx;
    struct trace *trace;
    uint64_t barriers0;                /* the pool's parallel steps at moex_context_reset_op_times */
    struct board_net *board_net;       /* the forward pass as the board model prices it (made on first use) */
    float *logits;                     /* (n_vocab) of the last evaluated token */
    bool have_logits;
    int32_t *tokens;                   /* (cap) what the context holds, n_tokens of them */
    int n_tokens, cap;
    uint64_t evaluated;                /* tokens evaluated in all */
    struct api_seq *seqs;              /* (n_seq - 1) sequences 1.. of a multi-sequence context (api_batch.c), or NULL */
};

struct moex_sampler {
    struct sampler *s;
    const moex_model *m;
};

/* A context of n_seq sequences (moex_context_new is one of 1); the sequences
 * past the first are api_batch.c's, freed by api_seqs_free. */
moex_context *api_context_new(moex_model *m, const struct moex_context_params *p, int n_seq);
void api_seqs_free(moex_context *c);

/* Logs a message through the model's callback (printf-style). */
void moex_log(const moex_model *m, enum moex_log_level level, const char *fmt, ...) MOEX_PRINTF(3, 4);

/* Frees the model's grammar vocabulary (api_grammar.c). */
void api_grammar_vocab_free(moex_model *m);

/* Frees what api_board.c made for c. */
void api_board_free(moex_context *c);

/* Counts the loaded models (+1 at load, -1 at free): moex_set_isa refuses
 * to change the kernels under them. */
void api_model_loaded(int delta);

/* Text for people, written into a memory stream by the internals' printers:
 * api_text_open gives the stream (NULL when out of memory), api_text_close
 * the malloc'd text, or NULL with an error when the writing failed (ok
 * false, or the stream could not be completed). */
struct api_text {
    FILE *out;
    char *text;
    size_t len;
};
FILE *api_text_open(struct api_text *t);
char *api_text_close(struct api_text *t, bool ok);

#endif
