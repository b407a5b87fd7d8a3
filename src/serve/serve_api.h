/* The OpenAI request and response bodies of moex serve (cJSON). */
#ifndef MOEX_SERVE_API_H
#define MOEX_SERVE_API_H

#include "serve/serve.h"
#include "serve/serve_job.h"

#include <stdbool.h>
#include <stddef.h>

#define API_MAX_N 16                   /* most choices (n) a request may ask */

struct api_request {
    bool chat;                 /* /v1/chat/completions; else /v1/completions */
    bool stream, include_usage;
    int n;                     /* choices, each its own job (seed, seed + 1, ...) */
    bool logprobs;             /* the chosen tokens' log-probabilities ... */
    int top_logprobs;          /* ... and this many alternatives each */
    bool echo;                 /* completions: the prompt's text before each choice's */
    char *prompt_text;         /* (prompt_len) for echo; owned (api_request_free) */
    size_t prompt_len;
    bool split_reasoning;      /* chat: a <think> block's text as reasoning_content */
    bool think_open;           /* the prompt ends inside an open <think> block */
    uint64_t seed;             /* the first choice's seed, given or drawn */
    char user[64];             /* "user" (for the request log), cut */
    struct serve_struct *structured;   /* the job's (serve_struct.h), for the stream's chunks */
};
void api_request_free(struct api_request *r);

/* A refusal in the OpenAI error shape: status, message, param (or NULL), code (or NULL). */
struct api_error {
    int status;
    char message[256];
    const char *param, *code;
};

/* Fills the request and its first job (prompt tokens, sampler, max_tokens,
 * stop, penalties) from the body; -1 with e filled (400) when the body is
 * not a valid request. A field of the OpenAI API that moex does not
 * implement is refused by name; fields it does not know are ignored. The
 * request's fields are read in api_parse; the sampler settings go to the
 * job in api_sampler_fields. */
int api_parse(const moex_model *m, const struct serve_options *o, int n_ctx, const char *body, size_t len,
              struct api_request *r, struct serve_job *j, struct api_error *e);
/* A copy of job j for choice i of n > 1 (seed + i); NULL when out of memory. */
struct serve_job *api_job_copy(const struct serve_job *j, int i);

/* Where the reasoning and the answer lie in a chat's text[0..len): the
 * reasoning [r0, r1), the answer from c0; `safe`: the text that cannot
 * change meaning as more comes (all of it when final). */
struct think_split {
    size_t r0, r1, c0, c1;
};
void api_split_think(const struct api_request *r, const char *text, size_t len, bool final, struct think_split *o);

/* Response bodies, malloc'd (NULL when out of memory). */
/* Fills e as a 400 refusal naming param (code may be NULL) and returns -1. */
int api_refuse(struct api_error *e, const char *param, const char *code, const char *fmt, ...) SERVE_PRINTF(4, 5);
char *api_error_json(const struct api_error *e);
char *api_completion_json(const moex_model *m, const struct api_request *r, const char *id, long created,
                          const char *model, struct serve_job *const *jobs);
/* One server-sent event of choice `index`: content and reasoning text (either
 * may be empty), the logprobs of tokens[from, to) of the job, the finish
 * reason when not NULL; role: the chat's first chunk. */
struct api_piece {
    int index;
    const char *content, *reasoning;
    size_t content_len, reasoning_len;
    const struct serve_job *job;
    int tok_from, tok_to;
    const char *finish;
    bool role;
};
char *api_chunk_event(const moex_model *m, const struct api_request *r, const char *id, long created,
                      const char *model, const struct api_piece *p);
/* The usage event of a stream that asked for it (stream_options.include_usage). */
char *api_usage_event(const struct api_request *r, const char *id, long created, const char *model,
                      struct serve_job *const *jobs);
/* "data: {"error": ...}\n\n": how a stream ends when its generation fails. */
char *api_error_event(const struct api_error *e);
char *api_models_json(const char *model, long created);
char *api_model_json(const char *model, long created);

#endif
