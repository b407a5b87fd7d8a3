/* The gate of moex serve: its listening socket (IPv4 or IPv6) and one
 * thread that reads each new connection's request head without consuming
 * it (MSG_PEEK), under a deadline and a bound on how many wait, and answers
 * in the OpenAI error shape whatever libmicrohttpd would otherwise answer in
 * HTML or not at all (a head too large, a bad request line or version, a
 * missing Host, a bad or conflicting Content-Length, a chunked body, a body
 * over --max-body, a head too slow, too many connections). A head that
 * passes is handed to libmicrohttpd with its bytes still unread. */
#ifndef MOEX_SERVE_GATE_H
#define MOEX_SERVE_GATE_H

#include "serve/serve.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest request target (414) and the most bytes of a request head. */
#define GATE_MAX_TARGET 4096

struct MHD_Daemon;

struct gate_params {
    const struct serve_limits *limits;
    struct MHD_Daemon *daemon;         /* where a head that passes goes */
    atomic_int *handed;                /* connections libmicrohttpd holds (its notify callback counts them) */
    atomic_ullong *statuses;           /* (6) answers by hundreds, the gate's counted in */
    const char *cors_origin;           /* Access-Control-Allow-Origin on its answers; NULL: none */
    bool quiet;                        /* no line per answer on stderr */
};

struct gate;
/* A listening socket on the address (port 0: any free one); -1 with the
 * reason in why. */
int gate_listen(const struct sockaddr *addr, socklen_t len, char *why, size_t size);
/* Starts the thread over the listening socket (the gate then owns it). */
struct gate *gate_start(int listen_fd, const struct gate_params *p, char *why, size_t size);
/* Stops listening; heads still coming are answered 503; joins the thread. */
void gate_stop(struct gate *g);

/* What a complete request head (head[0..len), its blank line included)
 * gets: 0 when it may pass, else the status, with the reason in why. */
int gate_check_head(const char *head, size_t len, const struct serve_limits *lim, char *why, size_t size);

/* A whole HTTP response with an OpenAI error body, Connection: close
 * (malloc'd; NULL when out of memory). */
char *gate_error_response(int status, const char *message, const char *cors_origin, size_t *len);

#endif
