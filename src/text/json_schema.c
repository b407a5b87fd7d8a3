/* JSON schema -> GBNF. Each schema node becomes one rule named after its
 * place (prefix-properties-name-items ...); $defs become rules of their own,
 * made once, so recursive schemas stay finite. */
#include "text/json_schema.h"

#include "core/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64


struct conv {
    const struct json *root;   /* where $ref points into */
    struct json_buf *out;
    struct json_buf pending;   /* $defs still to write: their names, one per line */
    const char *prefix;
    int failed;
};

static int refuse(struct conv *c, const char *fmt, ...) MOEX_PRINTF(2, 3);
static int refuse(struct conv *c, const char *fmt, ...) {
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!c->failed) moex_errorf("json schema: %s", msg);
    c->failed = 1;
    return -1;
}

void json_schema_literal(struct json_buf *b, const char *s, size_t n) {
    json_buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char hex[8];
        if (ch == '"' || ch == '\\') {
            char e[2] = { '\\', (char)ch };
            json_buf_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7F) {
            snprintf(hex, sizeof hex, "\\x%02X", ch);
            json_buf_puts(b, hex);
        } else {
            json_buf_put(b, (const char *)&ch, 1);
        }
    }
    json_buf_puts(b, "\"");
}

/* The value as GBNF: its compact JSON as a literal, then space. */
static void literal_value(struct json_buf *b, const struct json *v) {
    struct json_buf j = { 0 };
    json_write(&j, v, false);
    if (j.oom) b->oom = true;
    else json_schema_literal(b, j.s, j.n);
    json_buf_puts(b, " space");
    free(j.s);
}

/* Rule names: letters and digits as they are, any other byte as -XX (hex),
 * so that distinct names stay distinct ("a.b" and "a-b"). */
static void put_name(struct json_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char ch = s[i], hex[4];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        snprintf(hex, sizeof hex, "-%02X", (unsigned char)ch);
        json_buf_puts(b, ok ? (char[2]){ ch, 0 } : hex);
    }
}

static bool is_annotation(const char *k) {
    static const char *const ignored[] = { "title", "description", "default", "examples", "$schema", "$id",
                                           "$comment", "$defs", "definitions", "deprecated",
                                           "readOnly", "writeOnly", NULL };
    for (int i = 0; ignored[i]; i++)
        if (strcmp(k, ignored[i]) == 0) return true;
    return false;
}

static int rule_body(struct conv *c, const struct json *s, const char *name, int depth);

/* Writes `name ::= body` for schema s; sub-rules are named name-... */
static int emit_rule(struct conv *c, const struct json *s, const char *name, int depth) {
    if (depth > MAX_DEPTH) return refuse(c, "nesting deeper than %d", MAX_DEPTH);
    struct json_buf body = { 0 };
    struct json_buf *saved = c->out;
    c->out = &body;
    int rc = rule_body(c, s, name, depth);
    c->out = saved;
    if (rc == 0) {
        json_buf_puts(c->out, name);
        json_buf_puts(c->out, " ::= ");
        json_buf_put(c->out, body.s ? body.s : "", body.n);
        json_buf_puts(c->out, "\n");
        if (body.oom) c->out->oom = true;
    }
    free(body.s);
    return rc;
}

/* A sub-schema's rule, referred to from the current body. */
static int sub_rule(struct conv *c, const struct json *s, const char *name, const char *suffix, size_t len,
                    int depth) {
    struct json_buf sub = { 0 };
    json_buf_puts(&sub, name);
    json_buf_puts(&sub, "-");
    put_name(&sub, suffix, len);
    if (sub.oom) return refuse(c, "out of memory");
    json_buf_puts(c->out, sub.s);
    /* the sub-rule goes to the enclosing output after this one's line: keep it aside */
    struct json_buf *body = c->out;
    c->out = &c->pending;
    int rc = emit_rule(c, s, sub.s, depth + 1);
    c->out = body;
    free(sub.s);
    return rc;
}

/* before name what i: "root-tail3" */
static void indexed_name(struct json_buf *o, const char *before, const char *name, const char *what, int i) {
    char num[16];
    snprintf(num, sizeof num, "%d", i);
    json_buf_puts(o, before);
    json_buf_puts(o, name);
    json_buf_puts(o, what);
    json_buf_puts(o, num);
}

static int object_body(struct conv *c, const struct json *s, const char *name, int depth) {
    const struct json *props = json_get(s, "properties"), *req = json_get(s, "required"),
                      *extra = json_get(s, "additionalProperties");
    if (extra && !(extra->type == JSON_BOOL && !extra->boolean) && props && props->n > 0)
        return refuse(c, "'additionalProperties' other than false beside 'properties' is not supported");
    if (!props || props->type != JSON_OBJECT || props->n == 0) {
        if (extra && extra->type == JSON_BOOL && !extra->boolean) json_buf_puts(c->out, "\"{\" space \"}\" space");
        else json_buf_puts(c->out, "json-object");
        return 0;
    }
    if (req && req->type != JSON_ARRAY) return refuse(c, "'required' must be an array");
    int n = props->n;
    bool *required = calloc((size_t)n, sizeof *required);
    if (!required) return refuse(c, "out of memory");
    for (int i = 0; req && i < req->n; i++) {
        bool found = false;
        for (int k = 0; k < n; k++) {
            if (req->items[i].type == JSON_STRING && req->items[i].len == props->key_lens[k] &&
                memcmp(req->items[i].str, props->keys[k], props->key_lens[k]) == 0)
                required[k] = found = true;
        }
        if (!found) {
            free(required);
            return refuse(c, "'required' names a property that 'properties' does not have");
        }
    }
    /* kv_i: "\"key\"" space ":" space value_i, as rules name-key; then the
     * comma structure: head_i (nothing before) and tail_i (after a member) */
    struct json_buf kv = { 0 };
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct json_buf key = { 0 };
        json_write_string(&key, props->keys[i], props->key_lens[i]);
        json_buf_puts(&kv, i ? "\n" : "");
        json_schema_literal(&kv, key.s ? key.s : "", key.n);
        free(key.s);
        json_buf_puts(&kv, " space \":\" space ");
        struct json_buf *body = c->out;
        c->out = &kv;
        char idx[16];
        snprintf(idx, sizeof idx, "p%d", i);
        rc = sub_rule(c, &props->items[i], name, idx, strlen(idx), depth);
        c->out = body;
    }
    if (rc == 0) {
        /* kv lines, one per property, in kv.s */
        char **kvs = calloc((size_t)n, sizeof *kvs);
        char *line = kv.s;
        for (int i = 0; kvs && i < n; i++) {
            kvs[i] = line;
            char *nl = strchr(line, '\n');
            if (nl) { *nl = 0; line = nl + 1; }
        }
        if (!kvs || kv.oom) {
            rc = refuse(c, "out of memory");
        } else {
            /* tail_i ::= "," space kv_i tail_{i+1}, the first part optional
             * for an optional property; head_i ::= kv_i tail_{i+1}, or
             * head_{i+1} too for an optional one */
            struct json_buf *o = &c->pending;
            for (int i = 0; i < n; i++) {
                indexed_name(o, "", name, "-tail", i);
                json_buf_puts(o, required[i] ? " ::= \",\" space " : " ::= (\",\" space ");
                json_buf_puts(o, kvs[i]);
                json_buf_puts(o, required[i] ? "" : ")?");
                if (i + 1 < n) indexed_name(o, " ", name, "-tail", i + 1);
                json_buf_puts(o, "\n");
                indexed_name(o, "", name, "-head", i);
                json_buf_puts(o, " ::= ");
                json_buf_puts(o, kvs[i]);
                if (i + 1 < n) indexed_name(o, " ", name, "-tail", i + 1);
                if (!required[i]) {
                    json_buf_puts(o, " | ");
                    if (i + 1 < n) indexed_name(o, "", name, "-head", i + 1);
                    else json_buf_puts(o, "\"\"");
                }
                json_buf_puts(o, "\n");
            }
            json_buf_puts(c->out, "\"{\" space ");
            json_buf_puts(c->out, name);
            json_buf_puts(c->out, "-head0 \"}\" space");
        }
        free(kvs);
    }
    free(kv.s);
    free(required);
    return rc;
}

static int count(struct conv *c, const struct json *s, const char *key, long *out) {
    const struct json *v = json_get(s, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER || v->number < 0 || v->number > 10000 || v->number != floor(v->number))
        return refuse(c, "'%s' must be an integer from 0 to 10000", key);
    *out = (long)v->number;
    return 0;
}

static int array_body(struct conv *c, const struct json *s, const char *name, int depth) {
    long lo = 0, hi = -1;
    if (json_get(s, "prefixItems")) return refuse(c, "unsupported keyword 'prefixItems'");
    if (count(c, s, "minItems", &lo) || count(c, s, "maxItems", &hi)) return -1;
    if (hi >= 0 && hi < lo) return refuse(c, "'maxItems' is below 'minItems'");
    const struct json *items = json_get(s, "items");
    struct json_buf item = { 0 };
    if (items) {
        struct json_buf *body = c->out;
        c->out = &item;
        int rc = sub_rule(c, items, name, "item", 4, depth);
        c->out = body;
        if (rc) { free(item.s); return rc; }
    } else {
        json_buf_puts(&item, "json-value");
    }
    const char *it = item.s ? item.s : "";
    char rep[48];
    json_buf_puts(c->out, "\"[\" space ");
    if (hi == 0) {
        /* nothing inside */
    } else {
        if (lo == 0) json_buf_puts(c->out, "(");
        json_buf_puts(c->out, it);
        long first = lo > 0 ? lo - 1 : 0;
        if (hi < 0) snprintf(rep, sizeof rep, "{%ld,}", first);
        else snprintf(rep, sizeof rep, "{%ld,%ld}", first, hi - 1);
        json_buf_puts(c->out, " (\",\" space ");
        json_buf_puts(c->out, it);
        json_buf_puts(c->out, ")");
        json_buf_puts(c->out, rep);
        if (lo == 0) json_buf_puts(c->out, ")?");
    }
    json_buf_puts(c->out, " \"]\" space");
    free(item.s);
    return 0;
}

/* String formats with a grammar of their own (RFC 3339 dates and times, UUIDs). */
static const struct {
    const char *name, *rule;
} FORMATS[] = {
    { "date", "json-date" },
    { "time", "json-time" },
    { "date-time", "json-date \"T\" json-time" },
    { "uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}" },
};

static int string_body(struct conv *c, const struct json *s) {
    const struct json *format = json_get(s, "format");
    if (format) {
        if (format->type != JSON_STRING) return refuse(c, "'format' must be a string");
        if (json_get(s, "minLength") || json_get(s, "maxLength"))
            return refuse(c, "'format' with 'minLength' or 'maxLength' is not supported");
        for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++) {
            if (strcmp(format->str, FORMATS[i].name) != 0) continue;
            json_buf_puts(c->out, "\"\\\"\" ");
            json_buf_puts(c->out, FORMATS[i].rule);
            json_buf_puts(c->out, " \"\\\"\" space");
            return 0;
        }
        return refuse(c, "unsupported 'format' \"%.40s\" (date, time, date-time and uuid are)", format->str);
    }
    long lo = 0, hi = -1;
    if (count(c, s, "minLength", &lo) || count(c, s, "maxLength", &hi)) return -1;
    if (hi >= 0 && hi < lo) return refuse(c, "'maxLength' is below 'minLength'");
    if (lo == 0 && hi < 0) {
        json_buf_puts(c->out, "json-string");
        return 0;
    }
    char rep[48];
    if (hi < 0) snprintf(rep, sizeof rep, "{%ld,}", lo);
    else snprintf(rep, sizeof rep, "{%ld,%ld}", lo, hi);
    json_buf_puts(c->out, "\"\\\"\" json-char");
    json_buf_puts(c->out, rep);
    json_buf_puts(c->out, " \"\\\"\" space");
    return 0;
}

/* Integers in [lo, hi] of the same number of digits k, as digit strings:
 * one alternative per shared prefix, the usual decomposition of a range
 * into character classes. */
static void digits_range(struct json_buf *b, const char *lo, const char *hi, int k) {
    if (k == 0) {
        json_buf_puts(b, "\"\"");
        return;
    }
    char cls[16];
    if (lo[0] == hi[0]) {
        snprintf(cls, sizeof cls, "[%c] ", lo[0]);
        json_buf_puts(b, cls);
        json_buf_puts(b, "(");
        digits_range(b, lo + 1, hi + 1, k - 1);
        json_buf_puts(b, ")");
        return;
    }
    bool lo_zeros = strspn(lo + 1, "0") == (size_t)(k - 1), hi_nines = strspn(hi + 1, "9") == (size_t)(k - 1);
    char tail[24];
    snprintf(tail, sizeof tail, " [0-9]{%d}", k - 1);
    /* the low end's first digit (unless the whole decade is in), the digits between, the high end's */
    char first = lo_zeros ? lo[0] : (char)(lo[0] + 1), last = hi_nines ? hi[0] : (char)(hi[0] - 1);
    json_buf_puts(b, "(");
    bool any = false;
    if (!lo_zeros) {
        char nines[24];
        memset(nines, '9', (size_t)(k - 1));
        nines[k - 1] = 0;
        snprintf(cls, sizeof cls, "[%c] (", lo[0]);
        json_buf_puts(b, cls);
        digits_range(b, lo + 1, nines, k - 1);
        json_buf_puts(b, ")");
        any = true;
    }
    if (first <= last) {
        snprintf(cls, sizeof cls, "%s[%c-%c]", any ? " | " : "", first, last);
        json_buf_puts(b, cls);
        if (k > 1) json_buf_puts(b, tail);
        any = true;
    }
    if (!hi_nines) {
        char zeros[24];
        memset(zeros, '0', (size_t)(k - 1));
        zeros[k - 1] = 0;
        snprintf(cls, sizeof cls, "%s[%c] (", any ? " | " : "", hi[0]);
        json_buf_puts(b, cls);
        digits_range(b, zeros, hi + 1, k - 1);
        json_buf_puts(b, ")");
    }
    json_buf_puts(b, ")");
}

/* Magnitudes in [lo, hi] (0 <= lo <= hi), no leading zeros: per number of digits. */
static void magnitude_range(struct json_buf *b, int64_t lo, int64_t hi) {
    char los[24], his[24];
    json_buf_puts(b, "(");
    int64_t low = 1;   /* 10^(k-1), the smallest k-digit number (0 for k = 1) */
    bool first = true;
    for (int k = 1; k <= 16; k++, low *= 10) {
        int64_t top = low * 10 - 1, a = k == 1 ? 0 : low, from = lo > a ? lo : a, to = hi < top ? hi : top;
        if (a > hi) break;
        if (from > to) continue;
        snprintf(los, sizeof los, "%0*lld", k, (long long)from);
        snprintf(his, sizeof his, "%0*lld", k, (long long)to);
        json_buf_puts(b, first ? "" : " | ");
        digits_range(b, los, his, k);
        first = false;
    }
    json_buf_puts(b, ")");
}

#define INT_LIMIT 9999999999999999ll   /* 16 digits, as json-int */

/* An integer's minimum, maximum, exclusiveMinimum, exclusiveMaximum as
 * [lo, hi]; false when it has none of them. */
static int integer_bounds(struct conv *c, const struct json *s, bool *bounded, int64_t *lo, int64_t *hi) {
    static const char *const keys[] = { "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum" };
    *lo = -INT_LIMIT;
    *hi = INT_LIMIT;
    *bounded = false;
    for (int i = 0; i < 4; i++) {
        const struct json *v = json_get(s, keys[i]);
        if (!v) continue;
        if (v->type != JSON_NUMBER || fabs(v->number) > (double)INT_LIMIT)
            return refuse(c, "'%s' must be a number within 16 digits", keys[i]);
        *bounded = true;
        double x = v->number;
        if (i < 2) {
            int64_t b = (int64_t)ceil(x);
            if (i == 1 && (double)b == x) b++;
            if (b > *lo) *lo = b;
        } else {
            int64_t b = (int64_t)floor(x);
            if (i == 3 && (double)b == x) b--;
            if (b < *hi) *hi = b;
        }
    }
    if (*lo > *hi) return refuse(c, "no integer is within 'minimum' and 'maximum'");
    return 0;
}

static int integer_body(struct conv *c, const struct json *s) {
    bool bounded;
    int64_t lo, hi;
    if (integer_bounds(c, s, &bounded, &lo, &hi)) return -1;
    if (!bounded) {
        json_buf_puts(c->out, "json-integer");
        return 0;
    }
    json_buf_puts(c->out, "(");
    if (lo < 0) {
        /* -m for m in [max(1, -hi), -lo] */
        json_buf_puts(c->out, "\"-\" ");
        magnitude_range(c->out, hi < 0 ? -hi : 1, -lo);
    }
    if (hi >= 0) {
        json_buf_puts(c->out, lo < 0 ? " | " : "");
        magnitude_range(c->out, lo > 0 ? lo : 0, hi);
    }
    json_buf_puts(c->out, ") space");
    return 0;
}

static int type_body(struct conv *c, const struct json *s, const char *type, const char *name, int depth) {
    if (strcmp(type, "integer") == 0) return integer_body(c, s);
    if (json_get(s, "minimum") || json_get(s, "maximum") || json_get(s, "exclusiveMinimum") ||
        json_get(s, "exclusiveMaximum"))
        return refuse(c, "'minimum' and 'maximum' are supported for integers only (type '%s')", type);
    if (strcmp(type, "object") == 0) return object_body(c, s, name, depth);
    if (strcmp(type, "array") == 0) return array_body(c, s, name, depth);
    if (strcmp(type, "string") == 0) return string_body(c, s);
    if (strcmp(type, "number") == 0) { json_buf_puts(c->out, "json-number"); return 0; }
    if (strcmp(type, "boolean") == 0) { json_buf_puts(c->out, "json-boolean"); return 0; }
    if (strcmp(type, "null") == 0) { json_buf_puts(c->out, "json-null"); return 0; }
    return refuse(c, "unknown type '%s'", type);
}

/* Keywords that a type's body reads (any other validation keyword is refused). */
static bool is_understood(const char *k) {
    static const char *const known[] = { "type", "properties", "required", "additionalProperties", "items",
                                         "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
                                         "anyOf", "$ref", "minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", "format", NULL };
    for (int i = 0; known[i]; i++)
        if (strcmp(k, known[i]) == 0) return true;
    return is_annotation(k);
}

static int ref_body(struct conv *c, const struct json *ref) {
    if (ref->type != JSON_STRING) return refuse(c, "'$ref' must be a string");
    const char *p = ref->str;
    const char *dir = strncmp(p, "#/$defs/", 8) == 0 ? "$defs" : strncmp(p, "#/definitions/", 14) == 0 ? "definitions" : NULL;
    if (!dir) return refuse(c, "'$ref' \"%.80s\": only #/$defs/NAME and #/definitions/NAME are supported", p);
    const char *key = p + strlen(dir) + 3;
    const struct json *target = json_get(json_get(c->root, dir), key);
    if (!target) return refuse(c, "'$ref' \"%.80s\" points at nothing", p);
    struct json_buf rule = { 0 };
    json_buf_puts(&rule, c->prefix);
    json_buf_puts(&rule, "-def-");
    put_name(&rule, key, strlen(key));
    if (rule.oom) return refuse(c, "out of memory");
    json_buf_puts(c->out, rule.s);
    /* written once, after everything else (pending holds "ref:NAME\n" marks) */
    struct json_buf mark = { 0 };
    json_buf_puts(&mark, "\n#ref ");
    json_buf_puts(&mark, rule.s);
    json_buf_puts(&mark, "\n");
    if (!c->pending.s || !strstr(c->pending.s, mark.s)) {
        json_buf_puts(&c->pending, mark.s);
        struct json_buf *body = c->out;
        c->out = &c->pending;
        int rc = emit_rule(c, target, rule.s, 1);
        c->out = body;
        free(mark.s);
        free(rule.s);
        return rc;
    }
    free(mark.s);
    free(rule.s);
    return 0;
}

static int rule_body(struct conv *c, const struct json *s, const char *name, int depth) {
    if (s->type == JSON_BOOL) {
        if (!s->boolean) return refuse(c, "the schema false allows nothing");
        json_buf_puts(c->out, "json-value");
        return 0;
    }
    if (s->type != JSON_OBJECT) return refuse(c, "a schema must be an object");
    for (int i = 0; i < s->n; i++)
        if (!is_understood(s->keys[i])) return refuse(c, "unsupported keyword '%s'", s->keys[i]);
    const struct json *v;
    if ((v = json_get(s, "$ref"))) return ref_body(c, v);
    if ((v = json_get(s, "const"))) { literal_value(c->out, v); return 0; }
    if ((v = json_get(s, "enum"))) {
        if (v->type != JSON_ARRAY || v->n == 0) return refuse(c, "'enum' must be a non-empty array");
        json_buf_puts(c->out, "(");
        for (int i = 0; i < v->n; i++) {
            if (i) json_buf_puts(c->out, " | ");
            literal_value(c->out, &v->items[i]);
        }
        json_buf_puts(c->out, ")");
        return 0;
    }
    if ((v = json_get(s, "anyOf"))) {
        if (v->type != JSON_ARRAY || v->n == 0) return refuse(c, "'anyOf' must be a non-empty array");
        for (int i = 0; i < v->n; i++) {
            char idx[16];
            snprintf(idx, sizeof idx, "a%d", i);
            if (i) json_buf_puts(c->out, " | ");
            if (sub_rule(c, &v->items[i], name, idx, strlen(idx), depth)) return -1;
        }
        return 0;
    }
    const struct json *type = json_get(s, "type");
    if (!type) {
        /* a keyword of one type implies it (and is never dropped) */
        if (json_get(s, "properties") || json_get(s, "additionalProperties") || json_get(s, "required"))
            return type_body(c, s, "object", name, depth);
        if (json_get(s, "items") || json_get(s, "minItems") || json_get(s, "maxItems"))
            return type_body(c, s, "array", name, depth);
        if (json_get(s, "minLength") || json_get(s, "maxLength") || json_get(s, "format"))
            return type_body(c, s, "string", name, depth);
        if (json_get(s, "minimum") || json_get(s, "maximum") || json_get(s, "exclusiveMinimum") ||
            json_get(s, "exclusiveMaximum"))
            return type_body(c, s, "number", name, depth);
        json_buf_puts(c->out, "json-value");
        return 0;
    }
    if (type->type == JSON_STRING) return type_body(c, s, type->str, name, depth);
    if (type->type != JSON_ARRAY || type->n == 0) return refuse(c, "'type' must be a string or an array of them");
    json_buf_puts(c->out, "(");
    for (int i = 0; i < type->n; i++) {
        if (type->items[i].type != JSON_STRING) return refuse(c, "'type' must be a string or an array of them");
        if (i) json_buf_puts(c->out, " | ");
        if (type_body(c, s, type->items[i].str, name, depth)) return -1;
    }
    json_buf_puts(c->out, ")");
    return 0;
}

int json_schema_rules(const struct json *schema, const struct json *defs_root, const char *prefix,
                      struct json_buf *out) {
    struct conv c = { .root = defs_root, .out = out, .prefix = prefix };
    int rc = emit_rule(&c, schema, prefix, 0);
    if (rc == 0 && c.pending.s) {
        /* drop the "#ref" marks: GBNF comments, but noise */
        for (char *line = c.pending.s; *line;) {
            char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
            if (strncmp(line, "#ref ", 5) != 0) json_buf_put(out, line, len);
            line += len;
        }
    }
    free(c.pending.s);
    if (rc == 0 && out->oom) return moex_errorf("json schema: out of memory");
    return rc;
}

char *json_schema_to_grammar(const char *schema_json) {
    struct json_buf out = { 0 };
    if (!schema_json) {
        json_buf_puts(&out, "root ::= json-object\n");
    } else {
        struct json *s = json_parse(schema_json, strlen(schema_json));
        if (!s) return NULL;
        int rc = json_schema_rules(s, s, "root", &out);
        json_free(s);
        if (rc) {
            free(out.s);
            return NULL;
        }
    }
    json_schema_common_rules(&out);
    if (out.oom) {
        free(out.s);
        return moex_errorf("json schema: out of memory"), NULL;
    }
    return out.s;
}
