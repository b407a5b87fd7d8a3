/* What the public handles of include/moex.h hold: the internals they wrap.
 * Only src/api/ reads them. */
#ifndef MOEX_API_IMPL_H
#define MOEX_API_IMPL_H

#include "moex_tools.h"

#include "core/error.h"
#include "model/model.h"
#include "moe/executor.h"

#include <stdatomic.h>
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
    bool summary_said;                 /* and what the device's budget holds */
    bool interleave_said;              /* the interleaved layout's pack file note was logged */
    _Atomic(struct grammar_vocab *) grammar_vocab; /* the token trie of grammars, made on first use (api_grammar.c) */
    atomic_bool threads_busy;          /* a call runs on the worker threads (api_threads_take) */
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
    atomic_bool busy;                  /* a call that evaluates or changes the context is running (api_enter) */
};

struct moex_sampler {
    struct sampler *s;
    const moex_model *m;
};

/* NULL arguments are refused everywhere (include/moex.h): api_null sets
 * "FUNCTION: NAME is NULL" and returns -1. */
int api_null(const char *function, const char *name);
#define API_CHECK(ptr, ret) do { if (!(ptr)) { api_null(__func__, #ptr); return ret; } } while (0)
#define API_CHECK_VOID(ptr) do { if (!(ptr)) { api_null(__func__, #ptr); return; } } while (0)

/* A context belongs to one thread at a time: the calls that evaluate or
 * change it take its busy flag first, so that a second caller (another
 * thread, or a callback of the first) gets -1 with an error instead of two
 * calls meeting in the model's threads. api_enter: 0, or -1 with the error
 * (NULL c included); api_leave gives the flag back. */
int api_enter(const moex_context *c, const char *function);
void api_leave(const moex_context *c);
/* The model's worker threads serve one call at a time (evaluation of any of
 * its contexts, making a context, packing, the bandwidth measure): a second
 * caller gets -1 with an error instead of meeting the first in the threads'
 * barrier. api_threads_give hands them back. */
int api_threads_take(const moex_model *m, const char *function);
void api_threads_give(const moex_model *m);

/* The evaluation behind moex_eval, moex_eval_all_logits and moex_prefill,
 * for callers that hold the context (api_enter). */
int api_eval(moex_context *c, const int32_t *tokens, int n, float *all_logits);
int api_prefill(moex_context *c, const int32_t *tokens, int n);
/* moex_shared_prefix without the checks. */
int api_shared_prefix(const moex_context *c, const int32_t *tokens, int n);
/* Draws from logits with s and records the token (moex_sample). */
int32_t api_sample(moex_sampler *s, float *logits);

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
