/* What the public handles of include/moex.h hold: the internals they wrap.
 * tools/ reaches through these for what the public header does not offer
 * (profiles, benchmarks, teacher-forced evaluation). */
#ifndef MOEX_API_IMPL_H
#define MOEX_API_IMPL_H

#include "moex.h"

#include "core/error.h"
#include "model/model.h"
#include "moe/executor.h"

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
    bool note_said;                    /* the executor's start-up note was logged (once per model) */
};

struct moex_context {
    moex_model *m;
    struct context *ctx;
    struct trace *trace;
    float *logits;                     /* (n_vocab) of the last evaluated token */
    bool have_logits;
    int32_t *tokens;                   /* (cap) what the context holds, n_tokens of them */
    int n_tokens, cap;
    uint64_t evaluated;                /* tokens evaluated in all */
    struct api_seq *seqs;              /* (n_seq - 1) sequences 1.. of a multi-sequence context (api_batch.c), or NULL */
};

struct moex_sampler {
    struct sampler *s;
};

/* A context of n_seq sequences (moex_context_new is one of 1); the sequences
 * past the first are api_batch.c's, freed by api_seqs_free. */
moex_context *api_context_new(moex_model *m, const struct moex_context_params *p, int n_seq);
void api_seqs_free(moex_context *c);

/* Logs a message through the model's callback (printf-style). */
void moex_log(const moex_model *m, enum moex_log_level level, const char *fmt, ...) MOEX_PRINTF(3, 4);

#endif
