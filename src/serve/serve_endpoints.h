/* The endpoints llama.cpp's server users script against (/health,
 * /tokenize, /detokenize, /props, /slots, in llama-server's shapes), and the
 * chat page at /. Bodies are malloc'd JSON (NULL when out of memory, or with
 * e->status set when the request is refused). */
#ifndef MOEX_SERVE_ENDPOINTS_H
#define MOEX_SERVE_ENDPOINTS_H

#include "serve/serve.h"
#include "serve/serve_api.h"
#include "serve/serve_sched.h"

#include <stdbool.h>

struct serve_health {
    bool ready;                        /* the model is loaded */
    int slots, busy, queued;
};
/* {"status": "loading"} (503) while the model loads, "busy" when every slot
 * is taken and requests wait (200; 503 when strict: ?fail_on_no_slot), else "ok". */
char *endpoint_health(const struct serve_health *h, bool strict, int *status);
char *endpoint_tokenize(const moex_model *m, const char *body, size_t len, struct api_error *e);
char *endpoint_detokenize(const moex_model *m, const char *body, size_t len, struct api_error *e);
char *endpoint_props(const moex_model *m, const struct serve_options *o, int n_ctx);
char *endpoint_slots(const struct sched_slot *slots, int n, int n_ctx);
/* /v1/embeddings on ctx (the caller's, used by one request at a time): the
 * mean-pooled, normalised final hidden state of each input (moex_embed). */
char *endpoint_embeddings(moex_model *m, moex_context *ctx, const char *model_id, const char *body, size_t len,
                          struct api_error *e);

/* The chat page (serve_page.c): one HTML file, no network, no build step. */
extern const char serve_page_html[];

#endif
