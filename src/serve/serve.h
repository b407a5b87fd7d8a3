/* moex serve: an OpenAI-compatible HTTP server over the public API
 * (libmicrohttpd for HTTP, cJSON for JSON). One thread per connection
 * parses and answers; the scheduler (serve_sched.h) generates. It is the
 * command line's, built into moex beside the library: like tools/ it uses
 * moex.h and its own headers only (tests/cli_public_api.sh), so its errors
 * come back in buffers of its own, not moex_last_error(). */
#ifndef MOEX_SERVE_H
#define MOEX_SERVE_H

#include "moex_tools.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Each bound has its default here and a flag in moex serve --help. */
struct serve_limits {
    size_t max_body;           /* request body bytes (413) */
    int max_prompt_tokens;     /* prompt tokens (400); never more than the slot's context */
    int max_tokens;            /* most max_tokens a request may ask, and the default (400) */
    size_t max_header_bytes;   /* all header names and values (431) */
    int max_headers;           /* header count (431) */
    int max_connections;       /* open connections; more get 503 */
    int idle_timeout_s;        /* a connection silent this long is closed */
    int total_timeout_s;       /* a generation running this long ends (finish_reason "length") */
    int request_timeout_s;     /* a request's head and body must arrive within this (408) */
};

#define SERVE_DEFAULT_MAX_BODY (1u << 20)
#define SERVE_DEFAULT_MAX_PROMPT_TOKENS 8192
#define SERVE_DEFAULT_MAX_TOKENS 2048
#define SERVE_DEFAULT_MAX_HEADER_BYTES 8192
#define SERVE_DEFAULT_MAX_HEADERS 64
#define SERVE_DEFAULT_MAX_CONNECTIONS 64
#define SERVE_DEFAULT_IDLE_TIMEOUT_S 30
#define SERVE_DEFAULT_TOTAL_TIMEOUT_S 600
#define SERVE_DEFAULT_REQUEST_TIMEOUT_S 10

struct serve_options {
    const char *host;          /* default "127.0.0.1"; an IPv6 address too ("::1", "[::]") */
    int port;                  /* 0: any free port (serve_port says which) */
    int parallel;              /* slots */
    struct moex_context_params ctx;    /* per slot */
    const char *api_key;       /* NULL: no Authorization check */
    const char *model_id;      /* the name /v1/models lists */
    struct serve_limits limits;
    bool reasoning_inline;     /* a chat's <think> block stays in content (default: reasoning_content) */
    const char *cors_origin;   /* Access-Control-Allow-Origin; NULL: no CORS */
    bool quiet;                /* no line per request on stderr */
};

void serve_options_default(struct serve_options *o);
/* Monotonic time in nanoseconds (deadlines, the scheduler's clocks). */
static inline int64_t serve_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#if defined(__GNUC__)
#define SERVE_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SERVE_PRINTF(a, b)
#endif
/* What can be checked before a model loads (the address); -1 with the
 * reason in why[0..size). */
int serve_check_options(const struct serve_options *o, char *why, size_t size);

struct server;
/* Binds and starts answering: /health says "loading", generation 503, until
 * serve_load. NULL with the reason in why. */
struct server *serve_start(const struct serve_options *o, char *why, size_t size);
/* Makes the slots on the model and starts serving it; -1 with the reason. */
int serve_load(struct server *s, moex_model *m, char *why, size_t size);
int serve_port(const struct server *s);
/* The context length of each slot. */
int serve_n_ctx(const struct server *s);
/* Stops accepting, ends what runs (each open request gets a whole answer or
 * its stream an error event), frees. */
void serve_stop(struct server *s);

#endif
