/* The HTTP side of moex serve: libmicrohttpd with a thread per connection.
 * A connection's thread checks the bounds and the key, parses the request,
 * queues it and waits: for the whole answer, or for each piece of a stream.
 * The scheduler thread does all evaluation. */
#include "serve/serve.h"
#include "serve/serve_api.h"
#include "serve/serve_sched.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

enum endpoint { EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER, EP_COUNT };
static const char *endpoint_names[EP_COUNT] = { "chat_completions", "completions", "models", "health", "metrics",
                                                "other" };

struct server {
    struct MHD_Daemon *daemon;
    struct scheduler *sched;
    moex_model *model;
    struct serve_options o;
    int n_ctx, port;
    long started;
    atomic_int connections;
    atomic_ullong next_id;
    atomic_ullong requests[EP_COUNT];
    atomic_ullong statuses[6];         /* by hundreds: [2] = 2xx ... [5] = 5xx */
};

void serve_options_default(struct serve_options *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 1;
    moex_context_params_default(&o->ctx);
    o->limits = (struct serve_limits){ SERVE_DEFAULT_MAX_BODY,        SERVE_DEFAULT_MAX_PROMPT_TOKENS,
                                       SERVE_DEFAULT_MAX_TOKENS,      SERVE_DEFAULT_MAX_HEADER_BYTES,
                                       SERVE_DEFAULT_MAX_HEADERS,     SERVE_DEFAULT_MAX_CONNECTIONS,
                                       SERVE_DEFAULT_IDLE_TIMEOUT_S,  SERVE_DEFAULT_TOTAL_TIMEOUT_S };
}

/* A connection's request: the body as it arrives. */
struct request {
    enum endpoint ep;
    char *body;
    size_t len, cap;
    bool too_large;
};

static enum MHD_Result send_body(struct server *s, struct MHD_Connection *c, int status, const char *type, char *body) {
    if (!body) { status = 500; body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}"); }
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", type);
    if (status == 405) MHD_add_response_header(r, "Allow", "GET, POST");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    atomic_fetch_add(&s->statuses[status / 100 < 6 ? status / 100 : 5], 1);
    return rc;
}

static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, int status, const char *code,
                                  const char *fmt, ...) SERVE_PRINTF(5, 6);
static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, int status, const char *code,
                                  const char *fmt, ...) {
    struct api_error e = { .status = status, .code = code };
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_body(s, c, status, "application/json", api_error_json(&e));
}

struct header_count {
    int n;
    size_t bytes;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    struct header_count *h = cls;
    h->n++;
    h->bytes += strlen(key) + (value ? strlen(value) : 0);
    return MHD_YES;
}

/* "Bearer KEY", compared in time that does not depend on where it differs. */
static bool authorized(const struct server *s, struct MHD_Connection *c) {
    if (!s->o.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    const char *k = h + 7, *want = s->o.api_key;
    size_t n = strlen(k), m = strlen(want);
    unsigned diff = n != m;
    for (size_t i = 0; i < n && i < m; i++) diff |= (unsigned char)(k[i] ^ want[i]);
    return diff == 0;
}

static void job_id(struct server *s, bool chat, char *out, size_t size) {
    snprintf(out, size, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
}

/* A stream being sent: events formatted from the job's released text. */
struct stream {
    struct server *s;
    struct serve_job *job;
    struct api_request req;
    char id[64];
    char *pending;                     /* formatted bytes not yet sent */
    size_t pending_len, pending_off;
    size_t sent;                       /* job text already in events */
    bool role_sent, ended;
};

static int pend(struct stream *st, char *ev) {
    if (!ev) return -1;
    size_t n = strlen(ev), have = st->pending_len - st->pending_off;
    char *g = malloc(have + n);
    if (!g) { free(ev); return -1; }
    if (have) memcpy(g, st->pending + st->pending_off, have);
    memcpy(g + have, ev, n);
    free(ev);
    free(st->pending);
    st->pending = g;
    st->pending_len = have + n;
    st->pending_off = 0;
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream *st = cls;
    struct server *s = st->s;
    struct serve_job *j = st->job;
    const char *model = s->o.model_id;
    if (st->pending_off == st->pending_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->role_sent && st->req.chat) {
            st->role_sent = true;
            if (pend(st, api_chunk_event(&st->req, st->id, s->started, model, "", 0, NULL, true))) goto fail;
        } else {
            pthread_mutex_t *mu = sched_mutex(s->sched);
            pthread_mutex_lock(mu);
            while (!j->done && j->released == st->sent) pthread_cond_wait(&j->changed, mu);
            int rc = 0;
            if (j->released > st->sent)
                rc = pend(st, api_chunk_event(&st->req, st->id, s->started, model, j->text + st->sent,
                                              j->released - st->sent, NULL, false));
            st->sent = j->released;
            bool done = j->done, cancelled = j->cancelled, failed = j->error[0] != 0;
            if (rc == 0 && done && !cancelled && !failed) {
                rc = pend(st, api_chunk_event(&st->req, st->id, s->started, model, "", 0, j->finish, false));
                if (rc == 0 && st->req.include_usage) rc = pend(st, api_usage_event(&st->req, st->id, s->started, model, j));
                if (rc == 0) rc = pend(st, strdup("data: [DONE]\n\n"));
                st->ended = true;
            }
            pthread_mutex_unlock(mu);
            if (rc || (done && (cancelled || failed))) goto fail;
        }
    }
    size_t n = st->pending_len - st->pending_off;
    if (n > max) n = max;
    if (n) memcpy(buf, st->pending + st->pending_off, n);
    st->pending_off += n;
    return (ssize_t)n;
fail:
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The stream is over, sent or not: a client that went away frees its slot now. */
static void stream_free(void *cls) {
    struct stream *st = cls;
    pthread_mutex_t *mu = sched_mutex(st->s->sched);
    pthread_mutex_lock(mu);
    if (!st->job->done) st->job->cancelled = true;
    serve_job_unref(st->job);
    pthread_mutex_unlock(mu);
    free(st->pending);
    free(st);
}

static int client_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

static enum MHD_Result generate(struct server *s, struct MHD_Connection *c, struct request *rq) {
    struct serve_job *j = serve_job_new();
    if (!j) return send_error(s, c, 500, NULL, "out of memory");
    struct api_request req = { .chat = rq->ep == EP_CHAT };
    struct api_error e = { 0 };
    if (api_parse(s->model, &s->o, s->n_ctx, rq->body ? rq->body : "", rq->len, &req, j, &e) != 0) {
        serve_job_unref(j);
        return send_body(s, c, e.status, "application/json", api_error_json(&e));
    }
    j->fd = client_fd(c);
    if (s->o.limits.total_timeout_s > 0) j->deadline_ns = serve_time_ns() + (int64_t)s->o.limits.total_timeout_s * 1000000000;
    sched_submit(s->sched, j);
    pthread_mutex_t *mu = sched_mutex(s->sched);
    if (req.stream) {
        struct stream *st = calloc(1, sizeof *st);
        if (!st) {
            pthread_mutex_lock(mu);
            j->cancelled = true;
            serve_job_unref(j);
            pthread_mutex_unlock(mu);
            return send_error(s, c, 500, NULL, "out of memory");
        }
        st->s = s;
        st->job = j;
        st->req = req;
        job_id(s, req.chat, st->id, sizeof st->id);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        if (!r) { stream_free(st); return MHD_NO; }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&s->statuses[2], 1);
        return rc;
    }
    pthread_mutex_lock(mu);
    while (!j->done) pthread_cond_wait(&j->changed, mu);
    pthread_mutex_unlock(mu);
    char id[64];
    job_id(s, req.chat, id, sizeof id);
    enum MHD_Result rc;
    if (j->error[0]) rc = send_error(s, c, 500, NULL, "generation failed: %s", j->error);
    else rc = send_body(s, c, 200, "application/json", api_completion_json(&req, id, s->started, s->o.model_id, j));
    pthread_mutex_lock(mu);
    serve_job_unref(j);
    pthread_mutex_unlock(mu);
    return rc;
}

/* Text that grows no further than its buffer (cut, never overrun). */
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

static char *metrics_text(struct server *s) {
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

static bool is_get(const char *method) { return !strcmp(method, "GET") || !strcmp(method, "HEAD"); }

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct request *rq = *con_cls;
    if (!rq) { /* the headers are in: the checks that need no body */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        static const char *paths[] = { "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics" };
        rq->ep = EP_OTHER;
        for (int i = 0; i < EP_OTHER; i++)
            if (!strcmp(url, paths[i])) rq->ep = (enum endpoint)i;
        atomic_fetch_add(&s->requests[rq->ep], 1);
        const struct serve_limits *lim = &s->o.limits;
        if (atomic_load(&s->connections) > lim->max_connections)
            return send_error(s, c, 503, NULL, "too many connections (--max-connections %d)", lim->max_connections);
        struct header_count h = { 0 };
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &h);
        if (h.n > lim->max_headers)
            return send_error(s, c, 431, NULL, "%d headers, more than %d (--max-headers)", h.n, lim->max_headers);
        if (h.bytes > lim->max_header_bytes)
            return send_error(s, c, 431, NULL, "%zu bytes of headers, more than %zu (--max-header-bytes)", h.bytes,
                              lim->max_header_bytes);
        if (rq->ep == EP_OTHER) return send_error(s, c, 404, NULL, "no route %s %s", method, url);
        bool post = rq->ep == EP_CHAT || rq->ep == EP_COMPLETIONS;
        if (post ? strcmp(method, "POST") : !is_get(method))
            return send_error(s, c, 405, NULL, "%s takes %s, not %s", url, post ? "POST" : "GET", method);
        if (rq->ep != EP_HEALTH && !authorized(s, c))
            return send_error(s, c, 401, "invalid_api_key", "a valid API key is needed: Authorization: Bearer KEY");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > lim->max_body)
            return send_error(s, c, 413, NULL, "the body is %s bytes, more than %zu (--max-body)", cl, lim->max_body);
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (rq->too_large || rq->len + n > s->o.limits.max_body) { rq->too_large = true; return MHD_YES; }
        if (rq->len + n + 1 > rq->cap) {
            size_t cap = (rq->len + n + 1) * 2;
            if (cap > s->o.limits.max_body + 1) cap = s->o.limits.max_body + 1;
            char *g = realloc(rq->body, cap);
            if (!g) return MHD_NO;
            rq->body = g;
            rq->cap = cap;
        }
        memcpy(rq->body + rq->len, upload, n);
        rq->len += n;
        return MHD_YES;
    }
    if (rq->too_large) return send_error(s, c, 413, NULL, "the body is more than %zu bytes (--max-body)", s->o.limits.max_body);
    switch (rq->ep) {
    case EP_HEALTH: return send_body(s, c, 200, "application/json", strdup("{\"status\":\"ok\"}"));
    case EP_MODELS: return send_body(s, c, 200, "application/json", api_models_json(s->o.model_id, s->started));
    case EP_METRICS: return send_body(s, c, 200, "text/plain; version=0.0.4", metrics_text(s));
    default: return generate(s, c, rq);
    }
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    struct request *rq = *con_cls;
    if (rq) free(rq->body);
    free(rq);
    *con_cls = NULL;
}

static void connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
    (void)c;
    (void)socket_context;
    struct server *s = cls;
    atomic_fetch_add(&s->connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

static int listen_address(const struct serve_options *o, struct sockaddr_in *addr, char *why, size_t size) {
    *addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
    const char *host = !strcmp(o->host, "localhost") ? "127.0.0.1" : o->host;
    if (inet_pton(AF_INET, host, &addr->sin_addr) == 1) return 0;
    snprintf(why, size, "--host: invalid value '%s' (expected an IPv4 address)", o->host);
    return -1;
}

int serve_check_options(const struct serve_options *o, char *why, size_t size) {
    struct sockaddr_in addr;
    return listen_address(o, &addr, why, size);
}

struct server *serve_start(moex_model *m, const struct serve_options *o, char *why, size_t size) {
    struct sockaddr_in addr;
    if (listen_address(o, &addr, why, size)) return NULL;
    struct server *s = calloc(1, sizeof *s);
    if (!s) return snprintf(why, size, "out of memory"), NULL;
    s->model = m;
    s->o = *o;
    if (!s->o.model_id) s->o.model_id = moex_model_name(m);
    s->started = (long)time(NULL);
    if (!(s->sched = sched_new(m, o->parallel, &o->ctx, why, size))) { free(s); return NULL; }
    s->n_ctx = sched_n_ctx(s->sched);
    size_t pool = 2 * o->limits.max_header_bytes + 16384;
    /* MHD's own hard cap sits above --max-connections, so that the ones over it get a JSON 503 */
    unsigned hard_cap = (unsigned)o->limits.max_connections + 16;
    s->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
                                 handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_LIMIT, hard_cap,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->limits.idle_timeout_s,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, connection_event, s, MHD_OPTION_END);
    if (!s->daemon) {
        sched_free(s->sched);
        free(s);
        snprintf(why, size, "cannot listen on %s:%d (in use, or not an address of this machine)", o->host, o->port);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    return s;
}

int serve_port(const struct server *s) { return s->port; }
int serve_n_ctx(const struct server *s) { return s->n_ctx; }

void serve_stop(struct server *s) {
    if (!s) return;
    MHD_quiesce_daemon(s->daemon);
    sched_stop(s->sched); /* running jobs end, so that their connections finish */
    MHD_stop_daemon(s->daemon);
    sched_free(s->sched);
    free(s);
}
