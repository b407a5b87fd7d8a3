/* GBNF text -> rules (grammar_impl.h). Repetitions become rules of their own:
 * x* is R ::= x R | (empty), x{2,4} is x x R2 with R2 ::= x R1 | (empty),
 * R1 ::= x | (empty); a group is a rule of its alternatives. */
#include "text/grammar_impl.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT 10000       /* bound of x{m,n}: more is a typo, not a grammar */

struct prule {
    char *name;
    struct gelem *e;           /* (cap) n used, alternatives separated by GE_ALT */
    uint32_t n, cap;
    bool defined;
    size_t used_at;            /* source offset of the first reference */
};

struct parser {
    const char *src, *p;
    struct prule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t (*ranges)[2];
    uint32_t n_ranges, cap_ranges;
    struct gset *sets;
    uint32_t n_sets, cap_sets;
    bool failed;
};

static void where(const struct parser *ps, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *s = ps->src; s < at && *s; s++) {
        if (*s == '\n') { (*line)++; *col = 1; }
        else if (((unsigned char)*s & 0xC0) != 0x80) (*col)++;
    }
}

/* Records the first error only: later ones follow from it. */
static bool fail(struct parser *ps, const char *at, const char *fmt, ...) MOEX_PRINTF(3, 4);
static bool fail(struct parser *ps, const char *at, const char *fmt, ...) {
    if (ps->failed) return false;
    ps->failed = true;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(ps, at, &line, &col);
    moex_errorf("grammar: line %d, column %d: %s", line, col, msg);
    return false;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
    if (need <= *cap) return true;
    uint32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool push(struct parser *ps, uint32_t rule, uint32_t type, uint32_t arg) {
    struct prule *r = &ps->rules[rule];
    if (!grow((void **)&r->e, &r->cap, r->n + 1, sizeof *r->e)) return fail(ps, ps->p, "out of memory");
    r->e[r->n++] = (struct gelem){ type, arg };
    return true;
}

/* A rule by name, made (undefined) when new; GRAMMAR_NONE when out of memory. */
static uint32_t rule_id(struct parser *ps, const char *name, size_t len, size_t used_at) {
    for (uint32_t i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == len && memcmp(ps->rules[i].name, name, len) == 0) return i;
    if (!grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof *ps->rules)) return GRAMMAR_NONE;
    struct prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = malloc(len + 1))) return GRAMMAR_NONE;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->used_at = used_at;
    return ps->n_rules++;
}

/* A rule of its own for a group or a repetition: "parent_N". */
static uint32_t new_rule(struct parser *ps, uint32_t parent) {
    char name[160];
    snprintf(name, sizeof name, "%.120s_%u", ps->rules[parent].name, ps->n_rules);
    uint32_t r = rule_id(ps, name, strlen(name), (size_t)(ps->p - ps->src));
    if (r == GRAMMAR_NONE) return fail(ps, ps->p, "out of memory"), GRAMMAR_NONE;
    ps->rules[r].defined = true;
    return r;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* A set of ranges[0..n) (sorted, merged, complemented when negated). */
static uint32_t add_set(struct parser *ps, uint32_t (*r)[2], uint32_t n, bool negated) {
    if (n > 1) qsort(r, n, sizeof *r, cmp_range); /* [] and [^] have no ranges (r may be NULL) */
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m > 0 && r[i][0] <= r[m - 1][1] + 1) {
            if (r[i][1] > r[m - 1][1]) r[m - 1][1] = r[i][1];
        } else {
            r[m][0] = r[i][0];
            r[m][1] = r[i][1];
            m++;
        }
    }
    if (!grow((void **)&ps->ranges, &ps->cap_ranges, ps->n_ranges + m + 1, sizeof *ps->ranges) ||
        !grow((void **)&ps->sets, &ps->cap_sets, ps->n_sets + 1, sizeof *ps->sets))
        return fail(ps, ps->p, "out of memory"), GRAMMAR_NONE;
    uint32_t first = ps->n_ranges;
    if (!negated) {
        for (uint32_t i = 0; i < m; i++) memcpy(ps->ranges[ps->n_ranges++], r[i], sizeof *r);
    } else {
        uint32_t lo = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (r[i][0] > lo) { ps->ranges[ps->n_ranges][0] = lo; ps->ranges[ps->n_ranges++][1] = r[i][0] - 1; }
            lo = r[i][1] + 1;
        }
        if (lo <= GRAMMAR_MAX_CODEPOINT) { ps->ranges[ps->n_ranges][0] = lo; ps->ranges[ps->n_ranges++][1] = GRAMMAR_MAX_CODEPOINT; }
    }
    ps->sets[ps->n_sets] = (struct gset){ first, ps->n_ranges - first };
    return ps->n_sets++;
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(struct parser *ps, bool newlines) {
    for (;;) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) ps->p++;
        else if (c == '#') while (*ps->p && *ps->p != '\n' && *ps->p != '\r') ps->p++;
        else return;
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 code point of the source. */
static bool decode_utf8(struct parser *ps, uint32_t *out) {
    const unsigned char *s = (const unsigned char *)ps->p;
    int n = s[0] < 0x80 ? 0 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 3 : s[0] >= 0xE0 ? 2 : s[0] >= 0xC2 && s[0] < 0xE0 ? 1 : -1;
    if (n < 0) return fail(ps, ps->p, "invalid UTF-8");
    uint32_t c = n == 0 ? s[0] : s[0] & (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail(ps, ps->p, "invalid UTF-8");
        c = c << 6 | (s[i] & 0x3F);
    }
    ps->p += n + 1;
    *out = c;
    return true;
}

/* A character of a literal or class, escapes resolved. */
static bool parse_char(struct parser *ps, uint32_t *out) {
    if (*ps->p != '\\') return decode_utf8(ps, out);
    const char *at = ps->p;
    char e = ps->p[1];
    ps->p += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t c = 0;
        for (int i = 0; i < digits; i++) {
            int h = hex_value(*ps->p);
            if (h < 0) return fail(ps, at, "\\%c needs %d hex digits", e, digits);
            c = c << 4 | (uint32_t)h;
            ps->p++;
        }
        if (c > GRAMMAR_MAX_CODEPOINT) return fail(ps, at, "code point U+%X is past U+10FFFF", c);
        *out = c;
        return true;
    }
    switch (e) {
    case 'n': *out = '\n'; return true;
    case 'r': *out = '\r'; return true;
    case 't': *out = '\t'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': *out = (unsigned char)e; return true;
    default: return fail(ps, at, "unknown escape '\\%c'", e ? e : '0');
    }
}

static bool parse_literal(struct parser *ps, uint32_t rule) {
    const char *open = ps->p++;
    while (*ps->p != '"') {
        if (!*ps->p || *ps->p == '\n' || *ps->p == '\r') return fail(ps, open, "unterminated string literal");
        uint32_t c, r[1][2];
        if (!parse_char(ps, &c)) return false;
        r[0][0] = r[0][1] = c;
        uint32_t set = add_set(ps, r, 1, false);
        if (set == GRAMMAR_NONE || !push(ps, rule, GE_SET, set)) return false;
    }
    ps->p++;
    return true;
}

static bool parse_class(struct parser *ps, uint32_t rule) {
    const char *open = ps->p++;
    bool negated = *ps->p == '^';
    if (negated) ps->p++;
    uint32_t (*r)[2] = NULL, n = 0, cap = 0;
    bool ok = true;
    while (ok && *ps->p != ']') {
        if (!*ps->p || *ps->p == '\n' || *ps->p == '\r') { ok = fail(ps, open, "unterminated character class"); break; }
        uint32_t lo, hi;
        if (!(ok = parse_char(ps, &lo))) break;
        hi = lo;
        if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']' && ps->p[1] != '\n' && ps->p[1] != '\r') {
            const char *dash = ps->p++;
            if (!(ok = parse_char(ps, &hi))) break;
            if (hi < lo) { ok = fail(ps, dash, "range end U+%04X is below its start U+%04X", hi, lo); break; }
        }
        if (!grow((void **)&r, &cap, n + 1, sizeof *r)) { ok = fail(ps, ps->p, "out of memory"); break; }
        r[n][0] = lo;
        r[n++][1] = hi;
    }
    if (ok && n == 0 && !negated) ok = fail(ps, open, "empty character class");
    if (ok) {
        ps->p++;
        uint32_t set = add_set(ps, r, n, negated);
        ok = set != GRAMMAR_NONE && push(ps, rule, GE_SET, set);
    }
    free(r);
    return ok;
}

static bool parse_alternates(struct parser *ps, uint32_t rule, bool nested);

/* x{m,n} of elems[start..) of rule: GRAMMAR_NONE as n means no bound. */
static bool repeat(struct parser *ps, uint32_t rule, uint32_t start, uint32_t m, uint32_t n) {
    struct prule *r = &ps->rules[rule];
    uint32_t len = r->n - start;
    if (len > 1) {
        /* a sequence (a literal) repeats as one rule */
        uint32_t sub = new_rule(ps, rule);
        if (sub == GRAMMAR_NONE) return false;
        r = &ps->rules[rule];
        for (uint32_t i = start; i < r->n; i++)
            if (!push(ps, sub, r->e[i].type, r->e[i].arg)) return false;
        if (!push(ps, sub, GE_END, 0)) return false;
        r = &ps->rules[rule];
        r->n = start;
        if (!push(ps, rule, GE_REF, sub)) return false;
    }
    struct gelem x = ps->rules[rule].e[start];
    ps->rules[rule].n = start;
    for (uint32_t i = 0; i < m; i++)
        if (!push(ps, rule, x.type, x.arg)) return false;
    if (n == GRAMMAR_NONE) {
        uint32_t star = new_rule(ps, rule);   /* star ::= x star | (empty) */
        return star != GRAMMAR_NONE && push(ps, star, x.type, x.arg) && push(ps, star, GE_REF, star) &&
               push(ps, star, GE_ALT, 0) && push(ps, star, GE_END, 0) && push(ps, rule, GE_REF, star);
    }
    uint32_t prev = GRAMMAR_NONE;
    for (uint32_t k = m; k < n; k++) {        /* opt_k ::= x opt_{k-1} | (empty) */
        uint32_t opt = new_rule(ps, rule);
        if (opt == GRAMMAR_NONE || !push(ps, opt, x.type, x.arg) ||
            (prev != GRAMMAR_NONE && !push(ps, opt, GE_REF, prev)) || !push(ps, opt, GE_ALT, 0) ||
            !push(ps, opt, GE_END, 0))
            return false;
        prev = opt;
    }
    return prev == GRAMMAR_NONE || push(ps, rule, GE_REF, prev);
}

static bool parse_count(struct parser *ps, uint32_t *out) {
    const char *at = ps->p;
    uint64_t v = 0;
    if (*ps->p < '0' || *ps->p > '9') return fail(ps, at, "expected a number in {m,n}");
    while (*ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (uint64_t)(*ps->p++ - '0');
        if (v > MAX_REPEAT) return fail(ps, at, "a repetition count above %d", MAX_REPEAT);
    }
    *out = (uint32_t)v;
    return true;
}

static bool parse_sequence(struct parser *ps, uint32_t rule, bool nested) {
    uint32_t last = GRAMMAR_NONE;   /* where the last element's elems start */
    for (;;) {
        char c = *ps->p;
        const char *at = ps->p;
        uint32_t start = ps->rules[rule].n;
        if (c == '"') {
            if (!parse_literal(ps, rule)) return false;
            last = ps->rules[rule].n > start ? start : GRAMMAR_NONE;
        } else if (c == '[') {
            if (!parse_class(ps, rule)) return false;
            last = start;
        } else if (c == '.') {
            ps->p++;
            uint32_t all[1][2] = { { 0, GRAMMAR_MAX_CODEPOINT } };
            uint32_t set = add_set(ps, all, 1, false);
            if (set == GRAMMAR_NONE || !push(ps, rule, GE_SET, set)) return false;
            last = start;
        } else if (is_word(c)) {
            const char *name = ps->p;
            while (is_word(*ps->p)) ps->p++;
            uint32_t ref = rule_id(ps, name, (size_t)(ps->p - name), (size_t)(name - ps->src));
            if (ref == GRAMMAR_NONE) return fail(ps, name, "out of memory");
            if (!push(ps, rule, GE_REF, ref)) return false;
            last = start;
        } else if (c == '(') {
            ps->p++;
            skip_space(ps, true);
            uint32_t group = new_rule(ps, rule);
            if (group == GRAMMAR_NONE || !parse_alternates(ps, group, true)) return false;
            if (*ps->p != ')') return fail(ps, at, "unclosed '('");
            ps->p++;
            if (!push(ps, group, GE_END, 0) || !push(ps, rule, GE_REF, group)) return false;
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == GRAMMAR_NONE) return fail(ps, at, "'%c' follows nothing to repeat", c);
            ps->p++;
            uint32_t m = c == '+', n = c == '?' ? 1 : GRAMMAR_NONE;
            if (c == '{') {
                skip_space(ps, false);
                if (!parse_count(ps, &m)) return false;
                skip_space(ps, false);
                n = m;
                if (*ps->p == ',') {
                    ps->p++;
                    skip_space(ps, false);
                    n = GRAMMAR_NONE;
                    if (*ps->p != '}' && !parse_count(ps, &n)) return false;
                    skip_space(ps, false);
                }
                if (*ps->p != '}') return fail(ps, at, "expected '}' to close {m,n}");
                ps->p++;
                if (n != GRAMMAR_NONE && n < m) return fail(ps, at, "{%u,%u}: the bound is below the minimum", m, n);
            }
            if (!repeat(ps, rule, last, m, n)) return false;
            last = GRAMMAR_NONE;
        } else {
            return true;
        }
        skip_space(ps, nested);
    }
}

static bool parse_alternates(struct parser *ps, uint32_t rule, bool nested) {
    if (!parse_sequence(ps, rule, nested)) return false;
    while (*ps->p == '|') {
        ps->p++;
        if (!push(ps, rule, GE_ALT, 0)) return false;
        skip_space(ps, true);
        if (!parse_sequence(ps, rule, nested)) return false;
    }
    return true;
}

static bool parse_rule(struct parser *ps) {
    const char *name = ps->p;
    while (is_word(*ps->p)) ps->p++;
    if (ps->p == name) return fail(ps, name, "expected a rule name");
    uint32_t rule = rule_id(ps, name, (size_t)(ps->p - name), (size_t)(name - ps->src));
    if (rule == GRAMMAR_NONE) return fail(ps, name, "out of memory");
    if (ps->rules[rule].defined)
        return fail(ps, name, "rule '%s' is defined twice", ps->rules[rule].name);
    ps->rules[rule].defined = true;
    skip_space(ps, false);
    if (strncmp(ps->p, "::=", 3) != 0) return fail(ps, ps->p, "expected '::=' after the rule name");
    ps->p += 3;
    skip_space(ps, true);
    if (!parse_alternates(ps, rule, false) || !push(ps, rule, GE_END, 0)) return false;
    if (*ps->p == '\r') ps->p++;
    if (*ps->p == '\n') ps->p++;
    else if (*ps->p) {
        if (*ps->p == ')') return fail(ps, ps->p, "')' without '('");
        return fail(ps, ps->p, "unexpected '%c'", *ps->p);
    }
    return true;
}

/* Rule r can match the empty string (given what is known of the others). */
static bool seq_nullable(const bool *nullable, const struct gelem *e) {
    for (; e->type != GE_END && e->type != GE_ALT; e++)
        if (e->type == GE_SET || !nullable[e->arg]) return false;
    return true;
}

/* Refuses rules that reach themselves before consuming anything. */
static bool check_left_recursion(struct parser *ps) {
    uint32_t n = ps->n_rules;
    bool *nullable = calloc(n, sizeof *nullable);
    uint8_t *color = calloc(n, 1);
    uint32_t *stack = malloc(sizeof *stack * (n + 1)), *at = malloc(sizeof *at * (n + 1));
    bool ok = nullable && color && stack && at;
    if (!ok) fail(ps, ps->p, "out of memory");
    for (bool changed = ok; changed;) {
        changed = false;
        for (uint32_t r = 0; r < n; r++) {
            if (nullable[r]) continue;
            const struct prule *pr = &ps->rules[r];
            for (uint32_t i = 0; i < pr->n; i++) {
                if ((i == 0 || pr->e[i - 1].type == GE_ALT) && seq_nullable(nullable, &pr->e[i])) {
                    nullable[r] = changed = true;
                    break;
                }
            }
        }
    }
    /* depth-first over "r may start with r2" edges; a grey rule met again is a cycle */
    for (uint32_t r0 = 0; ok && r0 < n; r0++) {
        if (color[r0]) continue;
        uint32_t depth = 0;
        stack[0] = r0;
        at[0] = 0;
        color[r0] = 1;
        while (ok && depth != UINT32_MAX) {
            const struct prule *pr = &ps->rules[stack[depth]];
            uint32_t i = at[depth], next = GRAMMAR_NONE;
            for (; i < pr->n && next == GRAMMAR_NONE; i++) {
                /* e[i] is a left edge when everything before it in its alternative is nullable */
                if (pr->e[i].type != GE_REF) continue;
                uint32_t k = i;
                while (k > 0 && pr->e[k - 1].type == GE_REF && nullable[pr->e[k - 1].arg]) k--;
                if (k > 0 && pr->e[k - 1].type != GE_ALT) continue;
                next = pr->e[i].arg;
            }
            at[depth] = i;
            if (next == GRAMMAR_NONE) {
                color[stack[depth]] = 2;
                depth = depth == 0 ? UINT32_MAX : depth - 1;
            } else if (color[next] == 1) {
                ok = fail(ps, ps->src + ps->rules[next].used_at,
                          "rule '%s' is left-recursive (it can reach itself before reading a character)",
                          ps->rules[next].name);
            } else if (color[next] == 0) {
                color[next] = 1;
                stack[++depth] = next;
                at[depth] = 0;
            }
        }
    }
    free(nullable);
    free(color);
    free(stack);
    free(at);
    return ok;
}

static struct grammar *build(struct parser *ps, uint32_t root) {
    struct grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    uint32_t n_elems = 0, n_alts = 0;
    for (uint32_t r = 0; r < ps->n_rules; r++) {
        n_elems += ps->rules[r].n;
        for (uint32_t i = 0; i < ps->rules[r].n; i++) n_alts += ps->rules[r].e[i].type != GE_REF && ps->rules[r].e[i].type != GE_SET;
    }
    g->elems = malloc(sizeof *g->elems * n_elems);
    g->alts = malloc(sizeof *g->alts * (n_alts + 1));
    g->rule_alts = malloc(sizeof *g->rule_alts * (ps->n_rules + 1));
    if (!g->elems || !g->alts || !g->rule_alts) { grammar_free(g); return NULL; }
    uint32_t e = 0, a = 0;
    for (uint32_t r = 0; r < ps->n_rules; r++) {
        g->rule_alts[r] = a;
        g->alts[a++] = e;
        for (uint32_t i = 0; i < ps->rules[r].n; i++) {
            g->elems[e++] = ps->rules[r].e[i];
            if (ps->rules[r].e[i].type == GE_ALT) g->alts[a++] = e;
        }
    }
    g->rule_alts[ps->n_rules] = a;
    g->n_elems = n_elems;
    g->n_rules = ps->n_rules;
    g->ranges = ps->ranges;
    g->sets = ps->sets;
    g->n_sets = ps->n_sets;
    ps->ranges = NULL;
    ps->sets = NULL;
    g->root = root;
    return g;
}

struct grammar *grammar_parse(const char *text, const char *root) {
    if (!text) return moex_errorf("grammar: no text"), NULL;
    if (!root) root = "root";
    struct parser ps = { .src = text, .p = text };
    struct grammar *g = NULL;
    skip_space(&ps, true);
    while (*ps.p && !ps.failed) {
        if (!parse_rule(&ps)) break;
        skip_space(&ps, true);
    }
    uint32_t root_id = GRAMMAR_NONE;
    for (uint32_t r = 0; !ps.failed && r < ps.n_rules; r++) {
        if (!ps.rules[r].defined) fail(&ps, ps.src + ps.rules[r].used_at, "rule '%s' is not defined", ps.rules[r].name);
        if (strcmp(ps.rules[r].name, root) == 0) root_id = r;
    }
    if (!ps.failed && root_id == GRAMMAR_NONE) moex_errorf("grammar: there is no rule '%s' to start from", root);
    else if (!ps.failed && check_left_recursion(&ps) && !(g = build(&ps, root_id))) moex_errorf("grammar: out of memory");
    for (uint32_t r = 0; r < ps.n_rules; r++) {
        free(ps.rules[r].name);
        free(ps.rules[r].e);
    }
    free(ps.rules);
    free(ps.ranges);
    free(ps.sets);
    return g;
}

void grammar_free(struct grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->alts);
    free(g->rule_alts);
    free(g->ranges);
    free(g->sets);
    free(g);
}

int grammar_n_rules(const struct grammar *g) { return (int)g->n_rules; }

/* The first range whose end is at or past c. */
static uint32_t first_reaching(const struct grammar *g, const struct gset *s, uint32_t c) {
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (g->ranges[s->first + mid][1] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

bool grammar_set_has(const struct grammar *g, uint32_t set, uint32_t c) {
    const struct gset *s = &g->sets[set];
    if (s->n == 1) return c >= g->ranges[s->first][0] && c <= g->ranges[s->first][1];
    uint32_t i = first_reaching(g, s, c);
    return i < s->n && g->ranges[s->first + i][0] <= c;
}

bool grammar_set_meets(const struct grammar *g, uint32_t set, uint32_t lo, uint32_t hi) {
    const struct gset *s = &g->sets[set];
    uint32_t i = first_reaching(g, s, lo);
    return i < s->n && g->ranges[s->first + i][0] <= hi;
}
