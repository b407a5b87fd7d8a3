/* A small JSON reader (RFC 8259; nesting bounded) and writer. */
#include "text/json_schema.h"

#include "core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

struct reader {
    const char *s, *p, *end;
    bool failed;
};

static bool bad(struct reader *r, const char *what) {
    if (!r->failed) moex_errorf("json: %s at byte %zu", what, (size_t)(r->p - r->s));
    r->failed = true;
    return false;
}

static void skip_ws(struct reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool literal(struct reader *r, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) return bad(r, "unexpected character");
    r->p += n;
    return true;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

static void put_utf8(char *out, size_t *n, uint32_t c) {
    if (c < 0x80) out[(*n)++] = (char)c;
    else if (c < 0x800) { out[(*n)++] = (char)(0xC0 | c >> 6); out[(*n)++] = (char)(0x80 | (c & 0x3F)); }
    else if (c < 0x10000) {
        out[(*n)++] = (char)(0xE0 | c >> 12);
        out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3F));
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | c >> 18);
        out[(*n)++] = (char)(0x80 | (c >> 12 & 0x3F));
        out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3F));
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    }
}

/* A string after its opening quote: its bytes, malloc'd. */
static bool read_string(struct reader *r, char **out, size_t *len) {
    const char *start = r->p;
    while (r->p < r->end && *r->p != '"') r->p += *r->p == '\\' && r->p + 1 < r->end ? 2 : 1;
    if (r->p >= r->end) return bad(r, "unterminated string");
    char *s = malloc((size_t)(r->p - start) + 1);   /* escapes never grow */
    if (!s) return bad(r, "out of memory");
    size_t n = 0;
    for (const char *p = start; p < r->p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) { free(s); r->p = p; return bad(r, "control character in a string"); }
        if (c != '\\') { s[n++] = (char)c; continue; }
        char e = *++p;
        switch (e) {
        case '"': case '\\': case '/': s[n++] = e; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u': {
            int u = r->p - p >= 5 ? hex4(p + 1) : -1;
            if (u < 0) { free(s); r->p = p; return bad(r, "bad \\u escape"); }
            p += 4;
            uint32_t c32 = (uint32_t)u;
            if (u >= 0xD800 && u < 0xDC00 && r->p - p >= 7 && p[1] == '\\' && p[2] == 'u') {
                int lo = hex4(p + 3);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    c32 = 0x10000 + ((uint32_t)(u - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
                    p += 6;
                }
            }
            put_utf8(s, &n, c32);
            break;
        }
        default: free(s); r->p = p; return bad(r, "bad escape in a string");
        }
    }
    s[n] = 0;
    r->p++;
    *out = s;
    *len = n;
    return true;
}

static bool read_value(struct reader *r, struct json *v, int depth);

static bool grow_items(struct json *v, int *cap, bool keys) {
    if (v->n < *cap) return true;
    int c = *cap ? *cap * 2 : 4;
    struct json *items = realloc(v->items, sizeof *items * (size_t)c);
    if (!items) return false;
    v->items = items;
    if (keys) {
        char **k = realloc(v->keys, sizeof *k * (size_t)c);
        if (!k) return false;
        v->keys = k;
        size_t *kl = realloc(v->key_lens, sizeof *kl * (size_t)c);
        if (!kl) return false;
        v->key_lens = kl;
    }
    *cap = c;
    return true;
}

static bool read_number(struct reader *r, struct json *v) {
    const char *start = r->p;
    if (r->p < r->end && *r->p == '-') r->p++;
    const char *digits = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    if (r->p == digits || (*digits == '0' && r->p - digits > 1)) return bad(r, "bad number");
    if (r->p < r->end && *r->p == '.') {
        const char *f = ++r->p;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
        if (r->p == f) return bad(r, "bad number");
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        const char *x = r->p;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
        if (r->p == x) return bad(r, "bad number");
    }
    v->type = JSON_NUMBER;
    v->len = (size_t)(r->p - start);
    if (!(v->str = malloc(v->len + 1))) return bad(r, "out of memory");
    memcpy(v->str, start, v->len);
    v->str[v->len] = 0;
    v->number = strtod(v->str, NULL);
    return true;
}

static bool read_value(struct reader *r, struct json *v, int depth) {
    memset(v, 0, sizeof *v);
    if (depth > MAX_DEPTH) return bad(r, "nesting too deep");
    skip_ws(r);
    if (r->p >= r->end) return bad(r, "unexpected end");
    char c = *r->p;
    if (c == 'n') return literal(r, "null");
    if (c == 't') { v->type = JSON_BOOL; v->boolean = true; return literal(r, "true"); }
    if (c == 'f') { v->type = JSON_BOOL; return literal(r, "false"); }
    if (c == '"') {
        r->p++;
        v->type = JSON_STRING;
        return read_string(r, &v->str, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(r, v);
    if (c != '[' && c != '{') return bad(r, "unexpected character");
    bool object = c == '{';
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == (object ? '}' : ']')) { r->p++; return true; }
    int cap = 0;
    for (;;) {
        if (!grow_items(v, &cap, object)) return bad(r, "out of memory");
        if (object) {
            skip_ws(r);
            if (r->p >= r->end || *r->p != '"') return bad(r, "expected a key");
            r->p++;
            if (!read_string(r, &v->keys[v->n], &v->key_lens[v->n])) return false;
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':') { free(v->keys[v->n]); return bad(r, "expected ':'"); }
            r->p++;
        }
        bool ok = read_value(r, &v->items[v->n], depth + 1);
        v->n++;
        if (!ok) return false;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') { r->p++; continue; }
        if (r->p < r->end && *r->p == (object ? '}' : ']')) { r->p++; return true; }
        return bad(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static void free_inner(struct json *v) {
    for (int i = 0; i < v->n; i++) {
        free_inner(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->str);
}

void json_free(struct json *v) {
    if (!v) return;
    free_inner(v);
    free(v);
}

struct json *json_parse(const char *text, size_t len) {
    struct reader r = { text, text, text + len, false };
    struct json *v = malloc(sizeof *v);
    if (!v) return moex_errorf("json: out of memory"), NULL;
    bool ok = read_value(&r, v, 0);
    if (ok) {
        skip_ws(&r);
        if (r.p < r.end) ok = bad(&r, "text after the value");
    }
    if (!ok) {
        json_free(v);
        return NULL;
    }
    return v;
}

const struct json *json_get(const struct json *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (int i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0) return &obj->items[i];
    return NULL;
}

void json_buf_put(struct json_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = true; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void json_buf_puts(struct json_buf *b, const char *s) { json_buf_put(b, s, strlen(s)); }

void json_write_string(struct json_buf *b, const char *s, size_t n) {
    json_buf_puts(b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" :
                          c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char hex[8];
        if (!esc && c < 0x20) {
            snprintf(hex, sizeof hex, "\\u%04x", c);
            esc = hex;
        }
        if (!esc) continue;
        json_buf_put(b, s + run, i - run);
        json_buf_puts(b, esc);
        run = i + 1;
    }
    json_buf_put(b, s + run, n - run);
    json_buf_puts(b, "\"");
}

void json_write(struct json_buf *b, const struct json *v, bool spaced) {
    switch (v->type) {
    case JSON_NULL: json_buf_puts(b, "null"); return;
    case JSON_BOOL: json_buf_puts(b, v->boolean ? "true" : "false"); return;
    case JSON_NUMBER: json_buf_put(b, v->str, v->len); return;
    case JSON_STRING: json_write_string(b, v->str, v->len); return;
    case JSON_ARRAY:
    case JSON_OBJECT:
        json_buf_puts(b, v->type == JSON_ARRAY ? "[" : "{");
        for (int i = 0; i < v->n; i++) {
            if (i) json_buf_puts(b, spaced ? ", " : ",");
            if (v->type == JSON_OBJECT) {
                json_write_string(b, v->keys[i], v->key_lens[i]);
                json_buf_puts(b, spaced ? ": " : ":");
            }
            json_write(b, &v->items[i], spaced);
        }
        json_buf_puts(b, v->type == JSON_ARRAY ? "]" : "}");
    }
}
