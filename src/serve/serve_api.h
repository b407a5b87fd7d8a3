/* The OpenAI request and response bodies of moex serve (cJSON). */
#ifndef MOEX_SERVE_API_H
#define MOEX_SERVE_API_H

#include "serve/serve.h"
#include "serve/serve_job.h"

#include <stdbool.h>
#include <stddef.h>

struct api_request {
    bool chat;                 /* /v1/chat/completions; else /v1/completions */
    bool stream, include_usage;
    struct serve_struct *structured;   /* the job's (serve_struct.h), for the stream's chunks */
};

/* A refusal in the OpenAI error shape: status, message, param (or NULL), code (or NULL). */
struct api_error {
    int status;
    char message[256];
    const char *param, *code;
};

/* Fills the job (prompt tokens, sampler, max_tokens, stop) from the body;
 * -1 with e filled (400) when the body is not a valid request. */
int api_parse(const moex_model *m, const struct serve_options *o, int n_ctx, const char *body, size_t len,
              struct api_request *r, struct serve_job *j, struct api_error *e);

/* Response bodies, malloc'd (NULL when out of memory). */
char *api_error_json(const struct api_error *e);
char *api_completion_json(const struct api_request *r, const char *id, long created, const char *model,
                          const struct serve_job *j);
/* One server-sent event: "data: {chunk}\n\n" with text (may be empty) and
 * the finish reason when not NULL; role: the chat's first chunk. */
char *api_chunk_event(const struct api_request *r, const char *id, long created, const char *model, const char *text,
                      size_t len, const char *finish, bool role);
/* The usage event of a stream that asked for it (stream_options.include_usage). */
char *api_usage_event(const struct api_request *r, const char *id, long created, const char *model,
                      const struct serve_job *j);
char *api_models_json(const char *model, long created);

#endif
