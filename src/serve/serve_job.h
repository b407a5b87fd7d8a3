/* One generation request as the HTTP side hands it to the scheduler, and
 * what comes back: text released for sending (stop strings held back until
 * they can no longer match), then the finish. Shared fields are guarded by
 * the scheduler's mutex; `changed` wakes the connection waiting on it. */
#ifndef MOEX_SERVE_JOB_H
#define MOEX_SERVE_JOB_H

#include "moex_tools.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_STOP 4
#define SERVE_MAX_TOP_LOGPROBS 20

/* One generated token's log-probability (the model's distribution, before
 * penalties and logit_bias) and the best alternatives, when asked. */
struct serve_token {
    int32_t id;
    float logprob;
    size_t text_end;                   /* the job's text length once the token was appended */
    int n_top;
    int32_t top_id[SERVE_MAX_TOP_LOGPROBS];
    float top_logprob[SERVE_MAX_TOP_LOGPROBS];
};

struct serve_job {
    /* the request (set before submitting, then read-only) */
    int32_t *prompt;                   /* (n_prompt) owned */
    int n_prompt;
    struct moex_sampler_params sampler;
    int max_tokens;
    char *stop[SERVE_MAX_STOP];        /* owned */
    int n_stop;
    int64_t deadline_ns;               /* serve_time_ns() after which generation ends; 0: none */
    int fd;                            /* the client's socket, watched for a hang-up; -1: none */
    bool logprobs;                     /* record tokens[] */
    int top_logprobs;                  /* alternatives per token, <= SERVE_MAX_TOP_LOGPROBS */
    float presence_penalty, frequency_penalty;
    int32_t *bias_id;                  /* (n_bias) logit_bias, owned */
    float *bias;
    int n_bias;
    struct serve_struct *structured;   /* grammar and tools (serve_struct.h), owned; NULL: none */
    uint64_t group;                    /* the request's jobs share it (n > 1); 0: a job alone */
    int choice;                        /* its index among them: choice 0 evaluates the prompt, the others copy it */

    /* shared with the scheduler */
    pthread_cond_t changed;
    pthread_cond_t *wake;              /* signalled on a change: &changed, or the request's when it has several jobs */
    char *text;                        /* (cap) generated text so far */
    size_t len, cap;
    size_t released;                   /* text[0..released) may be sent */
    bool done;                         /* finish, n_generated and error are set */
    bool cancelled;                    /* the client is gone: stop and free the slot */
    const char *finish;                /* "stop" or "length" */
    int n_generated;                   /* tokens generated, an end-of-generation token not counted */
    int n_reused;                      /* prompt tokens the slot already held */
    char error[256];                   /* "" unless the generation failed */
    int refs;                          /* the connection and the scheduler */
    struct serve_token *tokens;        /* (n_tokens) when logprobs */
    int n_tokens, cap_tokens;
};

struct serve_job *serve_job_new(void);
/* Drops one reference (under the scheduler's mutex); frees on the last. */
void serve_job_unref(struct serve_job *j);

#endif
