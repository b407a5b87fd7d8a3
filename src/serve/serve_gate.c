#include "serve/serve_gate.h"

#include "serve/serve_api.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* A head is looked for in at most this many bytes: the target, the headers'
 * names and values and their punctuation. */
static size_t head_bound(const struct serve_limits *lim) {
    return GATE_MAX_TARGET + 64 + lim->max_header_bytes + 4 * (size_t)lim->max_headers;
}

/* A refused request is read and thrown away (so that a client still sending
 * its body sees the answer, not a reset) up to this many bytes, for at most
 * the request timeout. */
#define DRAIN_MAX_BYTES (256ull << 20)

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

char *gate_error_response(int status, const char *message, const char *cors_origin, size_t *len) {
    struct api_error e = { .status = status };
    snprintf(e.message, sizeof e.message, "%s", message);
    char *body = api_error_json(&e);
    if (!body) return NULL;
    size_t n = strlen(body) + 512 + (cors_origin ? strlen(cors_origin) : 0);
    char *r = malloc(n);
    if (r) {
        int k = snprintf(r, n,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n%s%s%s%s\r\n%s",
                         status, reason(status), strlen(body), status == 503 ? "Retry-After: 1\r\n" : "",
                         cors_origin ? "Access-Control-Allow-Origin: " : "", cors_origin ? cors_origin : "",
                         cors_origin ? "\r\n" : "", body);
        *len = (size_t)k;
    }
    free(body);
    return r;
}

/* ---- The thread. */

enum pending_state { HEAD, DRAIN };

struct pending {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    enum pending_state state;
    int64_t deadline_ns;
    size_t seen;                       /* bytes peeked so far (HEAD) */
    unsigned long long drained;        /* bytes thrown away (DRAIN) */
    struct pending *prev, *next;
};

struct gate {
    struct gate_params p;
    int listen_fd, epoll_fd, wake_fd[2];
    pthread_t thread;
    struct pending *list;
    int n_head, n_drain;
    atomic_bool stopping;
};

static void unlink_pending(struct gate *g, struct pending *c) {
    if (c->prev) c->prev->next = c->next;
    else g->list = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->state == HEAD) g->n_head--;
    else g->n_drain--;
}

static void close_pending(struct gate *g, struct pending *c) {
    unlink_pending(g, c);
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

static void log_answer(const struct gate *g, const char *why, int status) {
    if (g->p.quiet) return;
    fprintf(stderr, "moex serve: - - %d 0+0 tokens 0 ms (%s)\n", status, why);
}

/* Answers the connection (it has sent no more than a head) with an error,
 * then reads what it still sends until it is done, or for a bounded time. */
static void refuse(struct gate *g, struct pending *c, int status, const char *why) {
    size_t len = 0;
    char *r = gate_error_response(status, why, g->p.cors_origin, &len);
    if (r) (void)!send(c->fd, r, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(r);
    atomic_fetch_add(&g->p.statuses[status / 100 < 6 ? status / 100 : 5], 1);
    log_answer(g, why, status);
    shutdown(c->fd, SHUT_WR);
    if (c->state == HEAD) { g->n_head--; g->n_drain++; }
    c->state = DRAIN;
    int64_t drain_ns = (int64_t)g->p.limits->request_timeout_s * 1000000000;
    c->deadline_ns = serve_time_ns() + drain_ns;
}

static void drain(struct gate *g, struct pending *c) {
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            c->drained += (unsigned long long)n;
            if (c->drained > DRAIN_MAX_BYTES) break;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        break; /* the end, or an error */
    }
    close_pending(g, c);
}

/* The end of the head in buf[0..n) (the byte after its blank line), or 0. */
static size_t head_end(const char *buf, size_t n) {
    size_t i = 0;
    while (i < n && (buf[i] == '\r' || buf[i] == '\n')) i++;
    for (; i < n; i++) {
        if (buf[i] != '\n') continue;
        if (i + 1 < n && buf[i + 1] == '\n') return i + 2;
        if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

static void look(struct gate *g, struct pending *c) {
    size_t bound = head_bound(g->p.limits);
    char *buf = malloc(bound + 1);
    if (!buf) { close_pending(g, c); return; }
    ssize_t n = recv(c->fd, buf, bound + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) { free(buf); return; }
    if (n <= 0) { /* gone before a whole head, or shut its side: nothing to answer */
        free(buf);
        close_pending(g, c);
        return;
    }
    size_t end = head_end(buf, (size_t)n);
    char why[256];
    int status;
    if (end) status = gate_check_head(buf, end, g->p.limits, why, sizeof why);
    else if ((size_t)n > bound) {
        bool in_line = !memchr(buf, '\n', (size_t)n);
        status = in_line ? 414 : 431;
        snprintf(why, sizeof why, in_line ? "the request line is longer than %zu bytes"
                                          : "the request head is longer than %zu bytes", bound);
    } else {
        c->seen = (size_t)n;
        free(buf);
        return; /* more to come (edge-triggered: the next bytes wake us) */
    }
    free(buf);
    if (!status && atomic_load(g->p.handed) >= g->p.limits->max_connections) {
        status = 503;
        snprintf(why, sizeof why, "too many connections (--max-connections %d)", g->p.limits->max_connections);
    }
    if (status) { refuse(g, c, status, why); return; }
    int fd = c->fd;
    struct sockaddr_storage addr = c->addr;
    socklen_t addr_len = c->addr_len;
    epoll_ctl(g->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    unlink_pending(g, c);
    free(c);
    /* libmicrohttpd owns the socket from here (it closes it when it cannot take it) */
    MHD_add_connection(g->p.daemon, fd, (const struct sockaddr *)&addr, addr_len);
}

static void accept_all(struct gate *g) {
    /* Connections waiting for their heads, and refused ones still being read. */
    int most_heads = 4 * g->p.limits->max_connections + 64, most_drains = most_heads;
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct pending *c = calloc(1, sizeof *c);
        if (!c || g->n_drain >= most_drains) { free(c); close(fd); continue; }
        *c = (struct pending){ .fd = fd, .addr = addr, .addr_len = len, .state = HEAD, .next = g->list };
        c->deadline_ns = serve_time_ns() + (int64_t)g->p.limits->request_timeout_s * 1000000000;
        if (g->list) g->list->prev = c;
        g->list = c;
        g->n_head++;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c };
        if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, fd, &ev)) { close_pending(g, c); continue; }
        if (g->stopping) refuse(g, c, 503, "the server is stopping");
        else if (g->n_head > most_heads) refuse(g, c, 503, "too many connections waiting to send their requests");
        else look(g, c); /* what came with the connection */
    }
}

static void expire(struct gate *g) {
    int64_t now = serve_time_ns();
    for (struct pending *c = g->list, *next; c; c = next) {
        next = c->next;
        if (now < c->deadline_ns) continue;
        if (c->state == DRAIN) close_pending(g, c);
        else {
            char why[128];
            snprintf(why, sizeof why, "the request did not arrive within %d s (--request-timeout)",
                     g->p.limits->request_timeout_s);
            refuse(g, c, 408, why);
        }
    }
}

static void *gate_run(void *arg) {
    struct gate *g = arg;
    struct epoll_event evs[64];
    while (!g->stopping) {
        int n = epoll_wait(g->epoll_fd, evs, 64, 100);
        for (int i = 0; i < n && !g->stopping; i++) {
            void *ptr = evs[i].data.ptr;
            if (ptr == &g->listen_fd) accept_all(g);
            else if (ptr == g->wake_fd) continue;
            else {
                struct pending *c = ptr;
                if (c->state == HEAD) look(g, c);
                else drain(g, c);
            }
        }
        expire(g);
    }
    /* Stopping: heads still coming are told so, and nothing more is read. */
    while (g->list) {
        struct pending *c = g->list;
        if (c->state == HEAD) refuse(g, c, 503, "the server is stopping");
        close_pending(g, c);
    }
    return NULL;
}

int gate_listen(const struct sockaddr *addr, socklen_t len, char *why, size_t size) {
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return snprintf(why, size, "cannot make a socket: %s", strerror(errno)), -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, addr, len) || listen(fd, 1024)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

struct gate *gate_start(int listen_fd, const struct gate_params *p, char *why, size_t size) {
    struct gate *g = calloc(1, sizeof *g);
    if (!g) return snprintf(why, size, "out of memory"), NULL;
    g->p = *p;
    g->listen_fd = listen_fd;
    g->wake_fd[0] = g->wake_fd[1] = -1;
    g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (g->epoll_fd < 0 || pipe2(g->wake_fd, O_CLOEXEC | O_NONBLOCK)) goto fail;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &g->listen_fd };
    struct epoll_event wake = { .events = EPOLLIN, .data.ptr = g->wake_fd };
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) || epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->wake_fd[0], &wake))
        goto fail;
    if (pthread_create(&g->thread, NULL, gate_run, g)) goto fail;
    return g;
fail:
    snprintf(why, size, "cannot start the listening thread: %s", strerror(errno));
    if (g->epoll_fd >= 0) close(g->epoll_fd);
    if (g->wake_fd[0] >= 0) { close(g->wake_fd[0]); close(g->wake_fd[1]); }
    close(listen_fd);
    free(g);
    return NULL;
}

void gate_stop(struct gate *g) {
    if (!g) return;
    g->stopping = true;
    (void)!write(g->wake_fd[1], "x", 1);
    pthread_join(g->thread, NULL);
    close(g->listen_fd);
    close(g->epoll_fd);
    close(g->wake_fd[0]);
    close(g->wake_fd[1]);
    free(g);
}
