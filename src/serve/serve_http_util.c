/* moex serve's routes, its /metrics page and its options' defaults. */
#include "serve/serve.h"
#include "serve/serve_api.h"
#include "serve/serve_endpoints.h"
#include "serve/serve_gate.h"
#include "serve/serve_http_impl.h"
#include "serve/serve_sched.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *const endpoint_names[EP_COUNT] = { "chat_completions", "completions", "models", "health", "metrics",
                                                "tokenize", "detokenize", "props", "slots", "page", "embeddings", "model",
                                                "other" };
static const char *const endpoint_paths[EP_MODEL] = { "/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                                "/metrics", "/tokenize", "/detokenize", "/props", "/slots", "/",
                                                "/v1/embeddings" };


void serve_options_default(struct serve_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 1;
    moex_context_params_default(&o->ctx);
    o->limits = (struct serve_limits){ SERVE_DEFAULT_MAX_BODY,        SERVE_DEFAULT_MAX_PROMPT_TOKENS,
                                       SERVE_DEFAULT_MAX_TOKENS,      SERVE_DEFAULT_MAX_HEADER_BYTES,
                                       SERVE_DEFAULT_MAX_HEADERS,     SERVE_DEFAULT_MAX_CONNECTIONS,
                                       SERVE_DEFAULT_IDLE_TIMEOUT_S,  SERVE_DEFAULT_TOTAL_TIMEOUT_S,
                                       SERVE_DEFAULT_REQUEST_TIMEOUT_S };
}

enum endpoint serve_route(const char *url) {
    for (int i = 0; i < EP_MODEL; i++)
        if (!strcmp(url, endpoint_paths[i])) return (enum endpoint)i;
    if (!strcmp(url, "/v1/health")) return EP_HEALTH;
    if (!strcmp(url, "/v1/tokenize")) return EP_TOKENIZE;
    if (!strcmp(url, "/v1/detokenize")) return EP_DETOKENIZE;
    if (!strcmp(url, "/chat/completions")) return EP_CHAT;
    if (!strcmp(url, "/completions")) return EP_COMPLETIONS;
    if (!strcmp(url, "/models")) return EP_MODELS;
    if (!strcmp(url, "/embeddings")) return EP_EMBEDDINGS;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) return EP_MODEL;
    return EP_OTHER;
}

bool serve_is_post(enum endpoint ep) {
    return ep == EP_CHAT || ep == EP_COMPLETIONS || ep == EP_TOKENIZE || ep == EP_DETOKENIZE || ep == EP_EMBEDDINGS;
}

struct text {
    char *data;
    size_t cap, len;
};

static void put(struct text *t, const char *fmt, ...) SERVE_PRINTF(2, 3);
static void put(struct text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

char *serve_metrics_text(struct server *s) {
    struct sched_stats st;
    sched_stats(s->sched, &st);
    struct text t = { malloc(16384), 16384, 0 };
    if (!t.data) return NULL;
#define METRIC(type, name, help, fmt, ...)                                                              \
    put(&t, "# HELP moex_" name " " help "\n# TYPE moex_" name " " type "\n" "moex_" name " " fmt "\n", \
        __VA_ARGS__)
    put(&t, "# HELP moex_requests_total HTTP requests by endpoint\n"
                                            "# TYPE moex_requests_total counter\n");
    for (int i = 0; i < EP_COUNT; i++)
        put(&t, "moex_requests_total{endpoint=\"%s\"} %llu\n", endpoint_names[i],
                              (unsigned long long)atomic_load(&s->requests[i]));
    put(&t, "# HELP moex_responses_total HTTP responses by status class\n"
                                            "# TYPE moex_responses_total counter\n");
    for (int i = 2; i < 6; i++)
        put(&t, "moex_responses_total{code=\"%dxx\"} %llu\n", i,
                              (unsigned long long)atomic_load(&s->statuses[i]));
    double evaluated = (double)(st.prompt_tokens - st.reused_tokens);
    METRIC("counter", "prompt_tokens_total", "prompt tokens of finished prefills", "%llu", (unsigned long long)st.prompt_tokens);
    METRIC("counter", "prompt_tokens_reused_total", "prompt tokens a slot held already", "%llu", (unsigned long long)st.reused_tokens);
    METRIC("counter", "generated_tokens_total", "tokens generated", "%llu", (unsigned long long)st.generated_tokens);
    METRIC("counter", "prompt_seconds_total", "time in prefill", "%.6f", st.prompt_s);
    METRIC("counter", "generation_seconds_total", "time in decode steps", "%.6f", st.generate_s);
    METRIC("counter", "generation_cpu_seconds_total", "CPU time of the scheduler thread in decode steps", "%.6f",
           st.generate_cpu_s);
    METRIC("gauge", "prompt_tokens_per_second", "prompt tokens evaluated per second of prefill", "%.3f",
           st.prompt_s > 0 ? evaluated / st.prompt_s : 0.0);
    METRIC("gauge", "generation_tokens_per_second", "tokens generated per second of decode", "%.3f",
           st.generate_s > 0 ? (double)st.generated_tokens / st.generate_s : 0.0);
    METRIC("counter", "requests_finished_total", "generations finished", "%llu", (unsigned long long)st.requests_done);
    METRIC("counter", "requests_cancelled_total", "generations whose client went away", "%llu", (unsigned long long)st.cancelled);
    METRIC("gauge", "queue_depth", "requests waiting for a slot", "%d", st.queued);
    METRIC("gauge", "slots_busy", "slots generating", "%d", st.busy);
    METRIC("gauge", "slots", "slots (--parallel)", "%d", st.slots);
    METRIC("gauge", "connections", "open connections", "%d", atomic_load(&s->connections));
    METRIC("counter", "batches_total", "forward passes: one per step, all active slots batched", "%llu",
           (unsigned long long)st.batches);
    METRIC("counter", "batch_decode_tokens_total", "decode tokens of those passes", "%llu", (unsigned long long)st.decode_rows);
    put(&t, "# HELP moex_batch_tokens tokens per forward pass\n# TYPE moex_batch_tokens histogram\n");
    uint64_t cumulative = 0;
    for (int b = 0; b < SCHED_BATCH_BUCKETS; b++) {
        cumulative += st.batch_hist[b];
        if (b < SCHED_BATCH_BUCKETS - 1) put(&t, "moex_batch_tokens_bucket{le=\"%d\"} %llu\n", 1 << b, (unsigned long long)cumulative);
        else put(&t, "moex_batch_tokens_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cumulative);
    }
    put(&t, "moex_batch_tokens_sum %llu\nmoex_batch_tokens_count %llu\n", (unsigned long long)st.batch_rows,
        (unsigned long long)st.batches);
    METRIC("counter", "tokens_evaluated_total", "tokens evaluated by all slots", "%llu", (unsigned long long)st.experts.tokens);
    METRIC("counter", "expert_rows_device_total", "routed (token, expert) rows on the device", "%llu", (unsigned long long)st.experts.rows_device);
    METRIC("counter", "expert_rows_cpu_total", "routed (token, expert) rows on the CPU", "%llu", (unsigned long long)st.experts.rows_cpu);
    METRIC("counter", "expert_hits_total", "expert uses found resident on the device", "%llu", (unsigned long long)st.experts.hits);
    METRIC("counter", "expert_misses_total", "expert uses not resident", "%llu", (unsigned long long)st.experts.misses);
    METRIC("counter", "expert_fallbacks_total", "device work moved to the CPU", "%llu", (unsigned long long)st.experts.fallbacks);
    METRIC("gauge", "expert_resident_bytes", "resident device bytes (staging, backbone, experts)", "%llu", (unsigned long long)st.experts.resident_bytes);
#undef METRIC
    return t.data;
}

/* The request carries the --api-key (compared in constant time). */
bool serve_authorized(const struct server *s, struct MHD_Connection *c) {
    if (!s->o.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    const char *k = h + 7, *want = s->o.api_key;
    size_t n = strlen(k), m = strlen(want);
    unsigned diff = n != m;
    for (size_t i = 0; i < n && i < m; i++) diff |= (unsigned char)(k[i] ^ want[i]);
    return diff == 0;
}
