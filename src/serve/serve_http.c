/* The HTTP side of moex serve: the gate (serve_gate.h) accepts connections
 * and checks their request heads, then libmicrohttpd runs a thread per
 * connection. A connection's thread checks the key, parses the request,
 * queues it and waits: for the whole answer, or for each piece of a
 * stream. The scheduler thread does all evaluation. Every answer closes its
 * connection, so that each request passes the gate. */
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


/* A connection's request: the body as it arrives, and what the log says of it. */
struct request {
    enum endpoint ep;
    char *body;
    size_t len, cap;
    bool too_large, late;
    int64_t start_ns;
    char method[16], path[96], user[64];
    int status, n_prompt, n_generated;
};

static enum MHD_Result send_body(struct server *s, struct MHD_Connection *c, struct request *rq, int status,
                                 const char *type, char *body) {
    if (!body) { status = 500; body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}"); }
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Connection", "close");
    if (s->o.cors_origin) MHD_add_response_header(r, "Access-Control-Allow-Origin", s->o.cors_origin);
    if (status == 405) MHD_add_response_header(r, "Allow", "GET, POST, OPTIONS");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (status == 503) MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    atomic_fetch_add(&s->statuses[status / 100 < 6 ? status / 100 : 5], 1);
    rq->status = status;
    return rc;
}

static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, struct request *rq, int status,
                                  const char *code, const char *fmt, ...) SERVE_PRINTF(6, 7);
static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, struct request *rq, int status,
                                  const char *code, const char *fmt, ...) {
    struct api_error e = { .status = status, .code = code };
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_body(s, c, rq, status, "application/json", api_error_json(&e));
}

/* "Bearer KEY", compared in time that does not depend on where it differs. */
/* Ids unique across restarts: a random 64-bit base drawn at start, counted up. */
static void job_id(struct server *s, bool chat, char *out, size_t size) {
    snprintf(out, size, "%s-%016llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
}

/* The jobs of one request (n choices) and the condition they signal. */
struct group {
    struct serve_job *jobs[API_MAX_N];
    int n;
    pthread_cond_t wake;
};

/* Under the scheduler's mutex: the jobs signal their own condition again and
 * are let go (the scheduler may still hold them, when the client left). */
static void group_release(struct server *s, struct group *g) {
    pthread_mutex_t *mu = sched_mutex(s->sched);
    pthread_mutex_lock(mu);
    for (int i = 0; i < g->n; i++) {
        if (!g->jobs[i]->done) g->jobs[i]->cancelled = true;
        g->jobs[i]->wake = &g->jobs[i]->changed;
        serve_job_unref(g->jobs[i]);
    }
    pthread_mutex_unlock(mu);
    pthread_cond_destroy(&g->wake);
    g->n = 0;
}

/* The request's n jobs from the parsed first one, queued. -1 when out of memory. */
static int group_submit(struct server *s, struct group *g, struct serve_job *first, const struct api_request *req) {
    static atomic_uint_fast64_t groups;
    pthread_cond_init(&g->wake, NULL);
    g->jobs[0] = first;
    g->n = 1;
    if (req->n > 1) first->group = atomic_fetch_add(&groups, 1) + 1;
    for (int i = 1; i < req->n; i++) {
        if (!(g->jobs[i] = api_job_copy(first, i))) return -1;
        g->jobs[i]->group = first->group;
        g->jobs[i]->choice = i;
        g->n++;
    }
    for (int i = 0; i < g->n; i++) g->jobs[i]->wake = &g->wake;
    /* all at once: the scheduler sees a request's choices together, so that
     * those it gives a slot share the prompt choice 0 evaluates */
    sched_submit(s->sched, g->jobs, g->n);
    return 0;
}

/* A stream being sent: events formatted from the jobs' released text. */
struct stream {
    struct server *s;
    struct request *rq;                /* valid while the stream is read */
    struct group g;
    struct api_request req;
    char id[64];
    long created;
    char *pending;                     /* formatted bytes not yet sent */
    size_t pending_len, pending_off;
    size_t sent_r[API_MAX_N], sent_c[API_MAX_N]; /* reasoning and content already in events */
    int sent_tok[API_MAX_N];           /* tokens whose logprobs are in events */
    bool finished[API_MAX_N];
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

/* Under the mutex: events for what choice i released since the last. */
static int stream_choice(struct stream *st, int i) {
    const struct serve_job *j = st->g.jobs[i];
    struct server *s = st->s;
    const char *text = j->text ? j->text : "";
    struct think_split sp;
    api_split_think(&st->req, text, j->released, j->done, &sp);
    size_t r_from = st->sent_r[i] > sp.r0 ? st->sent_r[i] : sp.r0, c_from = st->sent_c[i] > sp.c0 ? st->sent_c[i] : sp.c0;
    int tok_to = st->sent_tok[i];
    while (tok_to < j->n_tokens && j->tokens[tok_to].text_end <= j->released) tok_to++;
    struct api_piece p = { .index = i, .job = j, .tok_from = st->sent_tok[i], .tok_to = tok_to };
    if (sp.r1 > r_from) { p.reasoning = text + r_from; p.reasoning_len = sp.r1 - r_from; st->sent_r[i] = sp.r1; }
    if (sp.c1 > c_from) { p.content = text + c_from; p.content_len = sp.c1 - c_from; st->sent_c[i] = sp.c1; }
    st->sent_tok[i] = tok_to;
    int rc = 0;
    if (p.reasoning_len || p.content_len || p.tok_to > p.tok_from)
        rc = pend(st, api_chunk_event(s->model, &st->req, st->id, st->created, s->o.model_id, &p));
    if (rc == 0 && j->done && !j->error[0] && !j->cancelled) {
        struct api_piece end = { .index = i, .finish = j->finish };
        rc = pend(st, api_chunk_event(s->model, &st->req, st->id, st->created, s->o.model_id, &end));
        st->finished[i] = true;
    }
    return rc;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream *st = cls;
    struct server *s = st->s;
    if (st->pending_off == st->pending_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->role_sent && (st->req.chat || st->req.echo)) {
            /* the first events: the chat's role, or the prompt a completion echoes */
            st->role_sent = true;
            for (int i = 0; i < st->g.n; i++) {
                struct api_piece p = { .index = i, .role = st->req.chat };
                if (st->req.echo) { p.content = st->req.prompt_text; p.content_len = st->req.prompt_len; }
                if (pend(st, api_chunk_event(s->model, &st->req, st->id, st->created, s->o.model_id, &p))) goto fail;
            }
        } else {
            pthread_mutex_t *mu = sched_mutex(s->sched);
            pthread_mutex_lock(mu);
            int rc = 0;
            for (;;) {
                bool all = true, failed = false;
                for (int i = 0; i < st->g.n && rc == 0; i++) {
                    const struct serve_job *j = st->g.jobs[i];
                    if (st->finished[i]) continue;
                    if (j->done && (j->error[0] || j->cancelled)) { failed = true; all = false; continue; }
                    rc = stream_choice(st, i);
                    all &= st->finished[i];
                }
                if (rc) break;
                if (failed) { /* the stream ends with an error event: no choice is left hanging */
                    const struct serve_job *bad = NULL;
                    for (int i = 0; i < st->g.n; i++)
                        if (st->g.jobs[i]->done && (st->g.jobs[i]->error[0] || st->g.jobs[i]->cancelled)) bad = st->g.jobs[i];
                    struct api_error e = { .status = atomic_load(&s->stopping) ? 503 : 500 };
                    snprintf(e.message, sizeof e.message, "generation failed: %.200s",
                             bad->error[0] ? bad->error : "cancelled");
                    rc = pend(st, api_error_event(&e));
                    st->ended = true;
                    break;
                }
                if (all) {
                    if (st->req.include_usage)
                        rc = pend(st, api_usage_event(&st->req, st->id, st->created, s->o.model_id, st->g.jobs));
                    if (rc == 0) rc = pend(st, strdup("data: [DONE]\n\n"));
                    st->ended = true;
                    for (int i = 0; i < st->g.n; i++) st->rq->n_generated += st->g.jobs[i]->n_generated;
                    break;
                }
                if (st->pending_len > st->pending_off) break;
                pthread_cond_wait(&st->g.wake, mu);
            }
            pthread_mutex_unlock(mu);
            if (rc) goto fail;
            if (st->pending_off == st->pending_len) return MHD_CONTENT_READER_END_OF_STREAM;
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
    group_release(st->s, &st->g);
    api_request_free(&st->req);
    free(st->pending);
    free(st);
}

static int client_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

static enum MHD_Result generate(struct server *s, struct MHD_Connection *c, struct request *rq) {
    struct serve_job *j = serve_job_new();
    if (!j) return send_error(s, c, rq, 500, NULL, "out of memory");
    struct api_request req = { .chat = rq->ep == EP_CHAT };
    struct api_error e = { 0 };
    long created = (long)time(NULL);
    if (api_parse(s->model, &s->o, s->n_ctx, rq->body ? rq->body : "", rq->len, &req, j, &e) != 0) {
        serve_job_unref(j);
        api_request_free(&req);
        return send_body(s, c, rq, e.status, "application/json", api_error_json(&e));
    }
    snprintf(rq->user, sizeof rq->user, "%s", req.user);
    rq->n_prompt = j->n_prompt;
    j->fd = client_fd(c);
    if (s->o.limits.total_timeout_s > 0) j->deadline_ns = serve_time_ns() + (int64_t)s->o.limits.total_timeout_s * 1000000000;
    pthread_mutex_t *mu = sched_mutex(s->sched);
    if (req.stream) {
        struct stream *st = calloc(1, sizeof *st);
        if (!st) {
            serve_job_unref(j);
            api_request_free(&req);
            return send_error(s, c, rq, 500, NULL, "out of memory");
        }
        st->s = s;
        st->rq = rq;
        st->req = req;
        st->created = created;
        job_id(s, req.chat, st->id, sizeof st->id);
        if (group_submit(s, &st->g, j, &req)) {
            stream_free(st);
            return send_error(s, c, rq, 500, NULL, "out of memory");
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        if (!r) { stream_free(st); return MHD_NO; }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "Connection", "close");
        if (s->o.cors_origin) MHD_add_response_header(r, "Access-Control-Allow-Origin", s->o.cors_origin);
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&s->statuses[2], 1);
        rq->status = 200;
        return rc;
    }
    struct group g = { 0 };
    if (group_submit(s, &g, j, &req)) {
        group_release(s, &g);
        api_request_free(&req);
        return send_error(s, c, rq, 500, NULL, "out of memory");
    }
    const char *error = NULL;
    pthread_mutex_lock(mu);
    for (int i = 0; i < g.n; i++) {
        while (!g.jobs[i]->done) pthread_cond_wait(&g.wake, mu);
        if (g.jobs[i]->error[0]) error = g.jobs[i]->error;
        rq->n_generated += g.jobs[i]->n_generated;
    }
    pthread_mutex_unlock(mu);
    char id[64];
    job_id(s, req.chat, id, sizeof id);
    enum MHD_Result rc;
    if (error) rc = send_error(s, c, rq, atomic_load(&s->stopping) ? 503 : 500, NULL, "generation failed: %s", error);
    else rc = send_body(s, c, rq, 200, "application/json", api_completion_json(s->model, &req, id, created, s->o.model_id, g.jobs));
    group_release(s, &g);
    api_request_free(&req);
    return rc;
}

/* Text that grows no further than its buffer (cut, never overrun). */

static bool is_get(const char *method) { return !strcmp(method, "GET") || !strcmp(method, "HEAD"); }

/* The CORS preflight: which methods and headers a page of the allowed origin may use. */
static enum MHD_Result preflight(struct server *s, struct MHD_Connection *c, struct request *rq) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Connection", "close");
    if (s->o.cors_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", s->o.cors_origin);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    }
    enum MHD_Result rc = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    atomic_fetch_add(&s->statuses[2], 1);
    rq->status = 204;
    return rc;
}

/* The checks that need no body, once the headers are in. */
static enum MHD_Result begin(struct server *s, struct MHD_Connection *c, struct request *rq, const char *url,
                             const char *method) {
    rq->ep = serve_route(url);
    rq->start_ns = serve_time_ns();
    snprintf(rq->method, sizeof rq->method, "%s", method);
    snprintf(rq->path, sizeof rq->path, "%s", url);
    atomic_fetch_add(&s->requests[rq->ep], 1);
    const struct serve_limits *lim = &s->o.limits;
    if (atomic_load(&s->connections) > lim->max_connections)
        return send_error(s, c, rq, 503, NULL, "too many connections (--max-connections %d)", lim->max_connections);
    if (rq->ep == EP_OTHER) return send_error(s, c, rq, 404, NULL, "no route %s %s", method, url);
    if (!strcmp(method, "OPTIONS")) return preflight(s, c, rq);
    if (serve_is_post(rq->ep) ? strcmp(method, "POST") : !is_get(method))
        return send_error(s, c, rq, 405, NULL, "%s takes %s, not %s", url, serve_is_post(rq->ep) ? "POST" : "GET", method);
    if (rq->ep != EP_HEALTH && rq->ep != EP_PAGE && !serve_authorized(s, c))
        return send_error(s, c, rq, 401, "invalid_api_key", "a valid API key is needed: Authorization: Bearer KEY");
    return MHD_YES;
}

static enum MHD_Result answer(struct server *s, struct MHD_Connection *c, struct request *rq) {
    const struct serve_limits *lim = &s->o.limits;
    if (rq->too_large) return send_error(s, c, rq, 413, NULL, "the body is more than %zu bytes (--max-body)", lim->max_body);
    if (rq->late)
        return send_error(s, c, rq, 408, NULL, "the request did not arrive within %d s (--request-timeout)",
                          lim->request_timeout_s);
    if (rq->ep == EP_HEALTH) {
        struct serve_health h = { .ready = atomic_load(&s->ready) };
        if (h.ready) {
            struct sched_stats st;
            sched_stats(s->sched, &st);
            h.slots = st.slots;
            h.busy = st.busy;
            h.queued = st.queued;
        }
        bool strict = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot") != NULL;
        int status = 200;
        char *body = endpoint_health(&h, strict, &status);
        return send_body(s, c, rq, status, "application/json", body);
    }
    if (rq->ep == EP_PAGE) return send_body(s, c, rq, 200, "text/html; charset=utf-8", strdup(serve_page_html));
    if (!atomic_load(&s->ready)) return send_error(s, c, rq, 503, NULL, "the model is loading");
    struct api_error e = { 0 };
    char *body = NULL;
    switch (rq->ep) {
    case EP_MODELS: body = api_models_json(s->o.model_id, s->started); break;
    case EP_MODEL:
        if (strcmp(rq->path + 11, s->o.model_id))
            return send_error(s, c, rq, 404, "model_not_found", "the model '%s' does not exist (this server has '%s')",
                              rq->path + 11, s->o.model_id);
        body = api_model_json(s->o.model_id, s->started);
        break;
    case EP_METRICS: return send_body(s, c, rq, 200, "text/plain; version=0.0.4", serve_metrics_text(s));
    case EP_TOKENIZE: body = endpoint_tokenize(s->model, rq->body ? rq->body : "", rq->len, &e); break;
    case EP_DETOKENIZE: body = endpoint_detokenize(s->model, rq->body ? rq->body : "", rq->len, &e); break;
    case EP_PROPS: body = endpoint_props(s->model, &s->o, s->n_ctx); break;
    case EP_EMBEDDINGS: {
        pthread_mutex_lock(&s->embed_mu);
        if (!s->embed_ctx) {
            struct moex_context_params cp = s->o.ctx;
            cp.n_ctx = s->n_ctx < s->o.limits.max_prompt_tokens ? s->n_ctx : s->o.limits.max_prompt_tokens;
            s->embed_ctx = moex_context_new(s->model, &cp);
        }
        if (s->embed_ctx) body = endpoint_embeddings(s->model, s->embed_ctx, s->o.model_id, rq->body ? rq->body : "", rq->len, &e);
        else snprintf(e.message, sizeof e.message, "cannot make the embeddings' context: %s", moex_last_error()), e.status = 500;
        pthread_mutex_unlock(&s->embed_mu);
        break;
    }
    case EP_SLOTS: {
        struct sched_slot *slots = calloc((size_t)s->o.parallel, sizeof *slots);
        if (slots) {
            sched_slots(s->sched, slots);
            body = endpoint_slots(slots, s->o.parallel, s->n_ctx);
        }
        free(slots);
        break;
    }
    default: return generate(s, c, rq);
    }
    if (e.status) return send_body(s, c, rq, e.status, "application/json", api_error_json(&e));
    return send_body(s, c, rq, 200, "application/json", body);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct request *rq = *con_cls;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        return begin(s, c, rq, url, method);
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (serve_time_ns() - rq->start_ns > (int64_t)s->o.limits.request_timeout_s * 1000000000) rq->late = true;
        if (rq->late || rq->too_large || rq->len + n > s->o.limits.max_body) { rq->too_large |= !rq->late; return MHD_YES; }
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
        rq->body[rq->len] = 0; /* the endpoints may read it as a string */
        return MHD_YES;
    }
    return answer(s, c, rq);
}

/* What a client sent, fit for one log line: control characters as '?'. */
static void loggable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 32 || *s == 127) *s = '?';
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    struct server *s = cls;
    struct request *rq = *con_cls;
    if (rq && !s->o.quiet) {
        loggable(rq->path);
        loggable(rq->user);
        double ms = (double)(serve_time_ns() - rq->start_ns) * 1e-6;
        fprintf(stderr, "moex serve: %s %s %d %d+%d tokens %.0f ms%s%s%s\n", rq->method, rq->path, rq->status,
                rq->n_prompt, rq->n_generated, ms, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (cut)",
                rq->user[0] ? " user=" : "", rq->user);
    }
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

/* The address to listen on: IPv4, or IPv6 ("::1", "[::1]"). */
static int listen_address(const struct serve_options *o, struct sockaddr_storage *addr, socklen_t *len, char *why,
                          size_t size) {
    char host[64];
    const char *h = !strcmp(o->host, "localhost") ? "127.0.0.1" : o->host;
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']' && n - 2 < sizeof host) {
        memcpy(host, h + 1, n - 2);
        host[n - 2] = 0;
        h = host;
    }
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
        *len = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        *len = sizeof *a6;
        return 0;
    }
    snprintf(why, size, "--host: invalid value '%s' (expected an IPv4 or IPv6 address)", o->host);
    return -1;
}

int serve_check_options(const struct serve_options *o, char *why, size_t size) {
    struct sockaddr_storage addr;
    socklen_t len;
    return listen_address(o, &addr, &len, why, size);
}

struct server *serve_start(const struct serve_options *o, char *why, size_t size) {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    if (listen_address(o, &addr, &addr_len, why, size)) return NULL;
    struct server *s = calloc(1, sizeof *s);
    if (!s) return snprintf(why, size, "out of memory"), NULL;
    s->o = *o;
    s->started = (long)time(NULL);
    pthread_mutex_init(&s->embed_mu, NULL);
    uint64_t base = 0;
    if (getrandom(&base, sizeof base, 0) != (ssize_t)sizeof base) base = (uint64_t)serve_time_ns() ^ (uint64_t)getpid() << 32;
    atomic_store(&s->next_id, base);
    int fd = gate_listen((struct sockaddr *)&addr, addr_len, why, size);
    if (fd < 0) {
        snprintf(why, size, "cannot listen on %s:%d (%s)", o->host, o->port,
                 errno == EADDRINUSE ? "in use" : errno == EADDRNOTAVAIL ? "not an address of this machine" : strerror(errno));
        free(s);
        return NULL;
    }
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &bound_len);
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    /* The gate has read the head: the pool holds it and the body's first pieces. */
    size_t pool = 2 * (o->limits.max_header_bytes + GATE_MAX_TARGET) + 32768;
    s->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_NO_LISTEN_SOCKET
                                     | MHD_USE_ITC,
                                 0, NULL, NULL, handle, s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->limits.max_connections + 16,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->limits.idle_timeout_s,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, connection_event, s, MHD_OPTION_END);
    if (!s->daemon) {
        close(fd);
        free(s);
        snprintf(why, size, "cannot start the HTTP server");
        return NULL;
    }
    struct gate_params gp = { .limits = &s->o.limits, .daemon = s->daemon, .handed = &s->connections,
                              .statuses = s->statuses, .cors_origin = s->o.cors_origin, .quiet = s->o.quiet };
    if (!(s->gate = gate_start(fd, &gp, why, size))) {
        MHD_stop_daemon(s->daemon);
        free(s);
        return NULL;
    }
    return s;
}

int serve_load(struct server *s, moex_model *m, char *why, size_t size) {
    s->model = m;
    if (!s->o.model_id) s->o.model_id = moex_model_name(m);
    if (!(s->sched = sched_new(m, s->o.parallel, &s->o.ctx, why, size))) return -1;
    s->n_ctx = sched_n_ctx(s->sched);
    atomic_store(&s->ready, true);
    return 0;
}

int serve_port(const struct server *s) { return s->port; }
int serve_n_ctx(const struct server *s) { return s->n_ctx; }

void serve_stop(struct server *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    gate_stop(s->gate); /* no new connections; heads still coming are told 503 */
    if (s->sched) sched_stop(s->sched); /* running jobs end with an error, so that their answers complete */
    /* Every request libmicrohttpd holds gets its whole answer (or its stream's error event) before the
     * connections are cut; bounded, for a client that does not read. */
    for (int i = 0; i < 3000 && atomic_load(&s->connections) > 0; i++) usleep(10000);
    MHD_stop_daemon(s->daemon);
    sched_free(s->sched);
    moex_context_free(s->embed_ctx);
    pthread_mutex_destroy(&s->embed_mu);
    free(s);
}
