/* Internal to moex serve's HTTP side (serve_http.c; serve_http_util.c: the
 * routes, the metrics text, the options' defaults). */
#ifndef MOEX_SERVE_HTTP_IMPL_H
#define MOEX_SERVE_HTTP_IMPL_H

#include "serve/serve.h"
#include "serve/serve_gate.h"
#include "serve/serve_sched.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

enum endpoint {
    EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_TOKENIZE, EP_DETOKENIZE, EP_PROPS, EP_SLOTS,
    EP_PAGE, EP_EMBEDDINGS, EP_MODEL, EP_OTHER, EP_COUNT
};
struct server {
    struct MHD_Daemon *daemon;
    struct gate *gate;
    struct scheduler *sched;           /* NULL while the model loads */
    moex_model *model;
    struct serve_options o;
    int n_ctx, port;
    long started;
    atomic_bool ready, stopping;
    atomic_int connections;            /* held by libmicrohttpd */
    atomic_ullong next_id;             /* ids: a random base drawn at start, counted up */
    atomic_ullong requests[EP_COUNT];
    atomic_ullong statuses[6];         /* by hundreds: [2] = 2xx ... [5] = 5xx */
    pthread_mutex_t embed_mu;          /* one /v1/embeddings at a time, on its own context */
    moex_context *embed_ctx;           /* made on the first */
};

extern const char *const endpoint_names[EP_COUNT];
/* The endpoint of a request's path. */
enum endpoint serve_route(const char *url);
bool serve_is_post(enum endpoint ep);
/* The /metrics page (Prometheus text), malloc'd. */
char *serve_metrics_text(struct server *s);
/* The request carries the --api-key, or none is asked for. */
bool serve_authorized(const struct server *s, struct MHD_Connection *c);

#endif
