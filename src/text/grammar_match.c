/* The incremental matcher: a set of parse stacks advanced byte by byte.
 * Stacks are nodes in an arena, unique per (position, parent), so stacks
 * that share their tails share nodes and a set never holds a stack twice.
 * A stack's top is always a character set; rule references and ended
 * alternatives are expanded as soon as they appear. */
#include "text/grammar_impl.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash(uint32_t pos, uint32_t parent, uint32_t n_buckets) {
    uint64_t h = ((uint64_t)pos << 32 | parent) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (n_buckets - 1);
}

static bool rehash(struct garena *a, uint32_t n_buckets) {
    uint32_t *b = malloc(sizeof *b * n_buckets);
    if (!b) return false;
    for (uint32_t i = 0; i < n_buckets; i++) b[i] = GRAMMAR_NONE;
    /* in creation order, so that newer nodes head their chains (rollback pops them) */
    for (uint32_t i = 0; i < a->n; i++) {
        uint32_t h = hash(a->nodes[i].pos, a->nodes[i].parent, n_buckets);
        a->nodes[i].next = b[h];
        b[h] = i;
    }
    free(a->buckets);
    a->buckets = b;
    a->n_buckets = n_buckets;
    return true;
}

/* The node (pos, parent), made when new; GRAMMAR_NONE when out of memory. */
static uint32_t node(struct garena *a, uint32_t pos, uint32_t parent) {
    if (a->n_buckets) {
        for (uint32_t i = a->buckets[hash(pos, parent, a->n_buckets)]; i != GRAMMAR_NONE; i = a->nodes[i].next)
            if (a->nodes[i].pos == pos && a->nodes[i].parent == parent) return i;
    }
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 1024;
        struct gnode *n = realloc(a->nodes, sizeof *n * cap);
        if (!n) return GRAMMAR_NONE;
        a->nodes = n;
        a->cap = cap;
    }
    if (a->n >= a->n_buckets && !rehash(a, a->n_buckets ? a->n_buckets * 2 : 1024)) return GRAMMAR_NONE;
    uint32_t h = hash(pos, parent, a->n_buckets), i = a->n++;
    a->nodes[i] = (struct gnode){ pos, parent, a->buckets[h], 0 };
    a->buckets[h] = i;
    return i;
}

void grammar_arena_rollback(struct garena *a, uint32_t keep) {
    while (a->n > keep) {
        struct gnode *n = &a->nodes[--a->n];
        a->buckets[hash(n->pos, n->parent, a->n_buckets)] = n->next;
    }
}

bool grammar_push_top(struct garena *a, uint32_t id) {
    if (a->n_tops == a->tops_cap) {
        uint32_t cap = a->tops_cap ? a->tops_cap * 2 : 256;
        uint32_t *t = realloc(a->tops, sizeof *t * cap);
        if (!t) return false;
        a->tops = t;
        a->tops_cap = cap;
    }
    a->tops[a->n_tops++] = id;
    return true;
}

/* Adds the stacks that node id stands for to the state being built at the
 * end of a->tops: itself when it is at a character set; the alternatives of
 * the rule it calls, each going on to what follows the call; what its parent
 * goes on with when it is at the end of an alternative. Each node once per
 * stamp: the result depends on the node only. */
static bool ends_here(const struct grammar *g, uint32_t pos) {
    return g->elems[pos].type == GE_END || g->elems[pos].type == GE_ALT;
}

static bool expand(const struct grammar *g, struct garena *a, uint32_t id, struct gstate *to) {
    for (;;) {
        struct gnode *n = &a->nodes[id];
        if (n->stamp == a->stamp) return true;
        n->stamp = a->stamp;
        const struct gelem *e = &g->elems[n->pos];
        if (e->type == GE_SET) {
            if (!grammar_push_top(a, id)) return false;
            to->n++;
            return true;
        }
        if (e->type == GE_REF) {
            /* a call in tail position returns straight to the caller's
             * caller: x* stays one level deep however long it runs */
            uint32_t cont = n->parent;
            if (!ends_here(g, n->pos + 1) && (cont = node(a, n->pos + 1, n->parent)) == GRAMMAR_NONE) return false;
            for (uint32_t k = g->rule_alts[e->arg]; k < g->rule_alts[e->arg + 1]; k++) {
                uint32_t alt = node(a, g->alts[k], cont);
                if (alt == GRAMMAR_NONE || !expand(g, a, alt, to)) return false;
            }
            return true;
        }
        /* the alternative ended */
        if (n->parent == GRAMMAR_NONE) {
            to->accepting = true;
            return true;
        }
        id = n->parent;
    }
}

static bool start_state(const struct grammar *g, struct garena *a, struct gstate *to) {
    *to = (struct gstate){ .first = a->n_tops };
    a->stamp++;
    for (uint32_t k = g->rule_alts[g->root]; k < g->rule_alts[g->root + 1]; k++) {
        uint32_t alt = node(a, g->alts[k], GRAMMAR_NONE);
        if (alt == GRAMMAR_NONE || !expand(g, a, alt, to)) return false;
    }
    return true;
}

/* Whether any stack of the state may take a code point in [lo, hi]. */
static bool any_meets(const struct grammar *g, const struct garena *a, const struct gstate *s, uint32_t lo, uint32_t hi) {
    for (uint32_t i = 0; i < s->n; i++)
        if (grammar_set_meets(g, g->elems[a->nodes[a->tops[s->first + i]].pos].arg, lo, hi)) return true;
    return false;
}

bool grammar_step(const struct grammar *g, struct garena *a, const struct gstate *from, uint8_t b, struct gstate *to) {
    *to = (struct gstate){ .first = a->n_tops };
    uint32_t value;
    if (from->utf8_need == 0) {
        int need = b < 0x80 ? 0 : b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : -1;
        if (need < 0) return false;
        value = need == 0 ? b : (uint32_t)(b & (0x3F >> need));
        to->utf8_need = (uint8_t)need;
        to->utf8_len = (uint8_t)(need + 1);
    } else {
        if ((b & 0xC0) != 0x80) return false;
        value = from->utf8_value << 6 | (b & 0x3F);
        to->utf8_need = from->utf8_need - 1;
        to->utf8_len = from->utf8_len;
    }
    /* well-formed UTF-8 only: no overlong forms, no surrogates (a model
     * would spell '"' as C0 A2 otherwise) */
    uint32_t least = to->utf8_len <= 1 ? 0 : to->utf8_len == 2 ? 0x80 : to->utf8_len == 3 ? 0x800 : 0x10000;
    if (to->utf8_need == 0) to->utf8_len = 0;   /* a whole character: states after any character compare equal */
    if (to->utf8_need > 0) {
        /* a code point under way: the stacks stay, if one of them can take some completion */
        uint32_t shift = 6u * to->utf8_need;
        uint32_t lo = value << shift, hi = lo | ((1u << shift) - 1);
        if (hi > GRAMMAR_MAX_CODEPOINT) hi = GRAMMAR_MAX_CODEPOINT;
        if (lo < least) lo = least;
        if (lo >= 0xD800 && hi <= 0xDFFF) return false;
        if (lo > hi || !any_meets(g, a, from, lo, hi)) return false;
        to->utf8_value = value;
        for (uint32_t i = 0; i < from->n; i++)
            if (!grammar_push_top(a, a->tops[from->first + i])) return false;
        to->n = from->n;
        return true;
    }
    if (value < least || value > GRAMMAR_MAX_CODEPOINT || (value >= 0xD800 && value <= 0xDFFF)) return false;
    a->stamp++;
    for (uint32_t i = 0; i < from->n; i++) {
        uint32_t id = a->tops[from->first + i];
        const struct gnode *n = &a->nodes[id];
        if (!grammar_set_has(g, g->elems[n->pos].arg, value)) continue;
        uint32_t next = n->parent;
        if (!ends_here(g, n->pos + 1)) next = node(a, n->pos + 1, n->parent);
        else if (next == GRAMMAR_NONE) { to->accepting = true; continue; }
        if (next == GRAMMAR_NONE || !expand(g, a, next, to)) return false;
    }
    return to->n > 0 || to->accepting;
}

struct grammar_matcher *grammar_matcher_new(const struct grammar *g) {
    struct grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return moex_errorf("grammar: out of memory"), NULL;
    m->g = g;
    if (!start_state(g, &m->a, &m->cur)) {
        grammar_matcher_free(m);
        return moex_errorf("grammar: out of memory"), NULL;
    }
    m->compacted = m->a.n;
    return m;
}

void grammar_matcher_free(struct grammar_matcher *m) {
    if (!m) return;
    free(m->a.nodes);
    free(m->a.buckets);
    free(m->a.tops);
    free(m);
}

/* Copies node id (and those below it) into b; map: old -> new. */
static uint32_t copy_node(const struct garena *a, struct garena *b, uint32_t *map, uint32_t id) {
    if (id == GRAMMAR_NONE) return GRAMMAR_NONE;
    if (map[id] != GRAMMAR_NONE) return map[id];
    uint32_t parent = copy_node(a, b, map, a->nodes[id].parent);
    if (a->nodes[id].parent != GRAMMAR_NONE && parent == GRAMMAR_NONE) return GRAMMAR_NONE;
    return map[id] = node(b, a->nodes[id].pos, parent);
}

/* Keeps only the nodes the current stacks use (the arena grows with every
 * token otherwise). The stacks are no deeper than the input is long, so the
 * copy recurses no deeper than that. */
static void compact(struct grammar_matcher *m) {
    uint32_t *map = malloc(sizeof *map * m->a.n);
    struct garena b = { 0 };
    if (!map) return;
    for (uint32_t i = 0; i < m->a.n; i++) map[i] = GRAMMAR_NONE;
    bool ok = true;
    for (uint32_t i = 0; ok && i < m->cur.n; i++) {
        uint32_t id = copy_node(&m->a, &b, map, m->a.tops[m->cur.first + i]);
        ok = id != GRAMMAR_NONE && grammar_push_top(&b, id);
    }
    free(map);
    if (!ok) {  /* out of memory: keep the big arena, it still works */
        free(b.nodes);
        free(b.buckets);
        free(b.tops);
        return;
    }
    b.stamp = m->a.stamp;
    free(m->a.nodes);
    free(m->a.buckets);
    free(m->a.tops);
    m->a = b;
    m->cur.first = 0;
    m->compacted = b.n;
    m->generation++;
}

/* The state after bytes[0..n), built in the arena; false (the arena as it
 * was) when they are refused. */
static bool run(struct grammar_matcher *m, const char *bytes, size_t n, struct gstate *out) {
    struct garena *a = &m->a;
    uint32_t keep_nodes = a->n, keep_tops = a->n_tops;
    struct gstate s = m->cur;
    for (size_t i = 0; i < n; i++) {
        struct gstate next;
        if (!grammar_step(m->g, a, &s, (uint8_t)bytes[i], &next)) {
            grammar_arena_rollback(a, keep_nodes);
            a->n_tops = keep_tops;
            return false;
        }
        s = next;
    }
    *out = s;
    return true;
}

bool grammar_matcher_check(struct grammar_matcher *m, const char *bytes, size_t n) {
    uint32_t keep_nodes = m->a.n, keep_tops = m->a.n_tops;
    struct gstate s;
    if (!run(m, bytes, n, &s)) return false;
    grammar_arena_rollback(&m->a, keep_nodes);
    m->a.n_tops = keep_tops;
    return true;
}

int grammar_matcher_accept(struct grammar_matcher *m, const char *bytes, size_t n) {
    struct garena *a = &m->a;
    struct gstate s;
    if (!run(m, bytes, n, &s)) return -1;
    /* the new state's tops to the front, the old ones are not needed */
    if (s.n) memmove(a->tops, a->tops + s.first, sizeof *a->tops * s.n); /* none: tops may be NULL */
    s.first = 0;
    a->n_tops = s.n;
    m->cur = s;
    if (a->n > 65536 && a->n > 4 * m->compacted) compact(m);
    return 0;
}

bool grammar_matcher_can_end(const struct grammar_matcher *m) { return m->cur.accepting && m->cur.utf8_need == 0; }

bool grammar_matcher_done(const struct grammar_matcher *m) { return m->cur.n == 0; }
