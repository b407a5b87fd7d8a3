/* The gate's verdict on a request head (serve_gate.h): pure, so that it is
 * tested and fuzzed alone (tests/test_serve_api.c, fuzz/fuzz_serve_head.c). */
#include "serve/serve_gate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int verdict(char *why, size_t size, int status, const char *fmt, ...) SERVE_PRINTF(4, 5);
static int verdict(char *why, size_t size, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return status;
}

static bool is_tchar(int c) {
    return c > 32 && c < 127 && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

/* Trims optional white space at both ends of [*s, *e). */
static void trim(const char **s, const char **e) {
    while (*s < *e && (**s == ' ' || **s == '\t')) (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

static bool name_is(const char *name, size_t n, const char *want) {
    return strlen(want) == n && !strncasecmp(name, want, n);
}

int gate_check_head(const char *head, size_t len, const struct serve_limits *lim, char *why, size_t size) {
    const char *p = head, *end = head + len;
    while (p < end && (*p == '\r' || *p == '\n')) p++; /* empty lines before the request line are ignored */
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) return verdict(why, size, 400, "the request line is incomplete");
    const char *line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    /* METHOD SP TARGET SP HTTP/1.x */
    const char *sp1 = memchr(p, ' ', (size_t)(line_end - p));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp1 == p || sp2 == sp1 + 1)
        return verdict(why, size, 400, "the request line is not METHOD TARGET HTTP/1.1");
    for (const char *c = p; c < sp1; c++)
        if (!is_tchar((unsigned char)*c)) return verdict(why, size, 400, "the method is not a token");
    if ((size_t)(sp2 - sp1 - 1) > GATE_MAX_TARGET)
        return verdict(why, size, 414, "the request target is %zu bytes, more than %d", (size_t)(sp2 - sp1 - 1),
                       GATE_MAX_TARGET);
    for (const char *c = sp1 + 1; c < sp2; c++)
        if ((unsigned char)*c <= 32 || *c == 127) return verdict(why, size, 400, "the request target holds a control character or a space");
    size_t vlen = (size_t)(line_end - sp2 - 1);
    const char *v = sp2 + 1;
    if (!(vlen == 8 && !memcmp(v, "HTTP/", 5) && isdigit((unsigned char)v[5]) && v[6] == '.' &&
          isdigit((unsigned char)v[7])))
        return verdict(why, size, 400, "the request line's version is not HTTP/1.1");
    if (v[5] != '1') return verdict(why, size, 505, "HTTP/%c.%c is not served (HTTP/1.0 and HTTP/1.1 are)", v[5], v[7]);
    bool http11 = v[7] != '0';

    int n_headers = 0, n_host = 0;
    size_t header_bytes = 0;
    bool have_length = false, chunked = false, other_coding = false;
    unsigned long long length = 0;
    for (p = eol + 1; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) return verdict(why, size, 400, "a header line is incomplete");
        line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (line_end == p) break; /* the blank line */
        if (*p == ' ' || *p == '\t') return verdict(why, size, 400, "a folded header line (obsolete line folding)");
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (!colon || colon == p) return verdict(why, size, 400, "a header line without a name and a colon");
        for (const char *c = p; c < colon; c++)
            if (!is_tchar((unsigned char)*c)) return verdict(why, size, 400, "a header name that is not a token");
        const char *vs = colon + 1, *ve = line_end;
        trim(&vs, &ve);
        for (const char *c = vs; c < ve; c++)
            if ((unsigned char)*c < 32 && *c != '\t') return verdict(why, size, 400, "a header value holds a control character");
        n_headers++;
        header_bytes += (size_t)(colon - p) + (size_t)(ve - vs);
        size_t nl = (size_t)(colon - p);
        if (name_is(p, nl, "Host")) n_host++;
        else if (name_is(p, nl, "Content-Length")) {
            if (vs == ve || ve - vs > 18) return verdict(why, size, 400, "Content-Length is not a number of bytes");
            unsigned long long n = 0;
            for (const char *c = vs; c < ve; c++) {
                if (!isdigit((unsigned char)*c)) return verdict(why, size, 400, "Content-Length is not a number of bytes");
                n = n * 10 + (unsigned)(*c - '0');
            }
            if (have_length && n != length) return verdict(why, size, 400, "conflicting Content-Length headers");
            have_length = true;
            length = n;
        } else if (name_is(p, nl, "Transfer-Encoding")) {
            if ((size_t)(ve - vs) == 7 && !strncasecmp(vs, "chunked", 7)) chunked = true;
            else other_coding = true;
        } else if (name_is(p, nl, "Expect")) {
            if (!((size_t)(ve - vs) == 12 && !strncasecmp(vs, "100-continue", 12)))
                return verdict(why, size, 417, "only Expect: 100-continue is understood");
        }
    }
    if (n_headers > lim->max_headers)
        return verdict(why, size, 431, "%d headers, more than %d (--max-headers)", n_headers, lim->max_headers);
    if (header_bytes > lim->max_header_bytes)
        return verdict(why, size, 431, "%zu bytes of headers, more than %zu (--max-header-bytes)", header_bytes,
                       lim->max_header_bytes);
    if (http11 && n_host != 1) return verdict(why, size, 400, "an HTTP/1.1 request needs one Host header");
    if (n_host > 1) return verdict(why, size, 400, "more than one Host header");
    if ((chunked || other_coding) && have_length)
        return verdict(why, size, 400, "both Transfer-Encoding and Content-Length");
    if (other_coding) return verdict(why, size, 501, "only the chunked transfer coding is known, and it is not taken");
    if (chunked) return verdict(why, size, 411, "send the body with a Content-Length (chunked request bodies are not taken)");
    if (length > lim->max_body)
        return verdict(why, size, 413, "the body is %llu bytes, more than %zu (--max-body)", length, lim->max_body);
    return 0;
}

