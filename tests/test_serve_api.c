/* moex serve's pure parts, alone: the <think> split that gives
 * reasoning_content (streamed piece by piece it says what it says at once),
 * and the gate's verdicts on request heads. */
#include "harness.h"

#ifdef MOEX_HAVE_HTTP
#include "serve/serve_api.h"
#include "serve/serve_endpoints.h"
#include "serve/serve_gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reasoning and answer of text, final. */
static void split(const struct api_request *r, const char *text, char *reasoning, char *content) {
    struct think_split sp;
    api_split_think(r, text, strlen(text), true, &sp);
    snprintf(reasoning, 256, "%.*s", (int)(sp.r1 - sp.r0), text + sp.r0);
    snprintf(content, 256, "%.*s", (int)(sp.c1 - sp.c0), text + sp.c0);
}

/* What a stream sends when the text grows a byte at a time: each piece
 * from the last sent end to the split's end, never taken back. */
static void split_streamed(const struct api_request *r, const char *text, char *reasoning, char *content) {
    size_t sent_r = 0, sent_c = 0, nr = 0, nc = 0, n = strlen(text);
    for (size_t len = 0; len <= n; len++) {
        struct think_split sp;
        api_split_think(r, text, len, len == n, &sp);
        size_t from = sent_r > sp.r0 ? sent_r : sp.r0;
        if (sp.r1 > from) { memcpy(reasoning + nr, text + from, sp.r1 - from); nr += sp.r1 - from; sent_r = sp.r1; }
        from = sent_c > sp.c0 ? sent_c : sp.c0;
        if (sp.c1 > from) { memcpy(content + nc, text + from, sp.c1 - from); nc += sp.c1 - from; sent_c = sp.c1; }
    }
    reasoning[nr] = content[nc] = 0;
}

static void test_think(void) {
    static const struct {
        bool open;                     /* the prompt opened the block */
        const char *text, *reasoning, *content;
    } cases[] = {
        { false, "<think>\nsome thought\n</think>\n\nThe answer.", "some thought", "The answer." },
        { false, "The answer, no block.", "", "The answer, no block." },
        { false, "<thin", "", "<thin" },                       /* final: not a tag */
        { false, "  <think>a</think>b", "a", "b" },
        { false, "<think>unfinished thought", "unfinished thought", "" },
        { false, "<think>x</thi", "x</thi", "" },
        { true, "thinking on\n</think>\n\nthe answer", "thinking on", "the answer" },
        { true, "still thinking", "still thinking", "" },
        { true, "a</think>b</think>c", "a", "b</think>c" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct api_request r = { .chat = true, .split_reasoning = true, .think_open = cases[i].open };
        char reasoning[256], content[256], sr[256], sc[256];
        split(&r, cases[i].text, reasoning, content);
        CHECKF(!strcmp(reasoning, cases[i].reasoning) && !strcmp(content, cases[i].content),
               "case %zu: reasoning '%s', content '%s'", i, reasoning, content);
        split_streamed(&r, cases[i].text, sr, sc);
        CHECKF(!strcmp(sr, reasoning) && !strcmp(sc, content), "case %zu streamed: '%s' / '%s'", i, sr, sc);
        r.split_reasoning = false; /* reasoning_format none: all of it is content */
        split(&r, cases[i].text, reasoning, content);
        CHECKF(!reasoning[0] && !strcmp(content, cases[i].text), "case %zu inline", i);
    }
}

static void test_gate(void) {
    struct serve_limits lim = { .max_body = 1000, .max_header_bytes = 200, .max_headers = 4 };
    static const struct {
        const char *head;
        int status;
    } cases[] = {
        { "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 0 },
        { "\r\nGET /health HTTP/1.1\nHost: x\n\n", 0 },           /* a leading empty line, bare LF */
        { "GET /health HTTP/1.0\r\n\r\n", 0 },                    /* 1.0 needs no Host */
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", 0 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nContent-Length: 10\r\n\r\n", 0 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", 413 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1 0\r\n\r\n", 400 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400 },
        { "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411 },
        { "GET /health HTTP/3.0\r\nHost: x\r\n\r\n", 505 },
        { "GET /health HTTP/1.1\r\n\r\n", 400 },
        { "GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400 },
        { "GET /health\r\n\r\n", 400 },
        { "GET  /health HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
        { "G(T /health HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
        { "GET /health HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400 },
        { "GET /health HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431 },
        { "GET /health HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256] = "";
        int status = gate_check_head(cases[i].head, strlen(cases[i].head), &lim, why, sizeof why);
        CHECKF(status == cases[i].status, "head %zu: %d, wanted %d (%s)", i, status, cases[i].status, why);
        CHECKF(status == 0 || why[0], "head %zu: a reason", i);
    }
    char big[600];
    snprintf(big, sizeof big, "GET /health HTTP/1.1\r\nHost: x\r\nX: %0300d\r\n\r\n", 0);
    char why[256];
    CHECK(gate_check_head(big, strlen(big), &lim, why, sizeof why) == 431);
    size_t len = 0;
    char *r = gate_error_response(503, "busy", "*", &len);
    CHECK(r && !strncmp(r, "HTTP/1.1 503 ", 13) && strstr(r, "Retry-After: 1\r\n") &&
          strstr(r, "Access-Control-Allow-Origin: *\r\n") && strstr(r, "\"type\":\"server_error\"") && len == strlen(r));
    free(r);
}

/* /health: what a balancer reads. */
static void test_health(void) {
    static const struct {
        struct serve_health h;
        bool strict;
        int status;
        const char *state;
    } cases[] = {
        { { .ready = false }, false, 503, "\"loading\"" },
        { { .ready = true, .slots = 2, .busy = 1 }, false, 200, "\"ok\"" },
        { { .ready = true, .slots = 2, .busy = 2 }, true, 200, "\"ok\"" },          /* full, none waiting */
        { { .ready = true, .slots = 2, .busy = 2, .queued = 3 }, false, 200, "\"busy\"" },
        { { .ready = true, .slots = 2, .busy = 2, .queued = 3 }, true, 503, "\"busy\"" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = 0;
        char *body = endpoint_health(&cases[i].h, cases[i].strict, &status);
        CHECKF(body && status == cases[i].status && strstr(body, cases[i].state), "health %zu: %d %s", i, status,
               body ? body : "(null)");
        free(body);
    }
}

int main(void) {
    test_health();
    test_think();
    test_gate();
    return test_finish();
}
#else
#include <stdio.h>
int main(void) {
    printf("SKIP: moex was built without HTTP support (libmicrohttpd-dev, libcjson-dev)\n");
    return 77;
}
#endif
