/* The token mask of a step. The vocabulary's byte strings, sorted, make a
 * trie stored in preorder: node i's subtree is nodes i..skip[i), so a
 * rejected prefix skips all the tokens that share it in one jump. The walk
 * keeps one matcher state per depth; a prefix shared by many tokens is
 * checked once. */
#include "text/grammar_impl.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tnode {
    uint32_t skip;             /* the first node after this one's subtree */
    uint32_t tok_first, tok_n; /* the tokens that end here: tok[tok_first .. + tok_n) */
    uint16_t depth;            /* 1 for a first byte */
    uint8_t byte;
};

/* What a subtree's token bytes, read from its node on, are made of. */
#define SUBTREE_WHOLE 1        /* whole, well-formed UTF-8 characters only */
#define SUBTREE_NON_ASCII 2    /* some of them beyond ASCII */

struct grammar_vocab {
    int n_tokens;
    uint64_t (*ascii)[2];      /* (n_nodes) the ASCII bytes of each subtree */
    uint8_t *shape;            /* (n_nodes) SUBTREE_* flags */
    int n_text;
    struct tnode *nodes;       /* (n_nodes) the trie in preorder */
    uint32_t n_nodes;
    int32_t *tok;              /* token ids in trie order */
    uint8_t *kinds;            /* (n_tokens) enum grammar_token_kind */
    char **bytes;              /* (n_tokens) each TEXT token's bytes, for accepting: into pool */
    char *pool;                /* every TEXT token's bytes, one after another */
    uint32_t *lens;            /* (n_tokens) */
    int32_t *ends;             /* the END tokens, n_ends of them */
    int n_ends;
    uint16_t max_depth;
};

struct sort_item {
    const char *s;
    size_t len;
    int32_t id;
};

static int by_bytes(const void *a, const void *b) {
    const struct sort_item *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void grammar_vocab_free(struct grammar_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->pool);
    free(v->lens);
    free(v->nodes);
    free(v->ascii);
    free(v->shape);
    free(v->tok);
    free(v->kinds);
    free(v->ends);
    free(v);
}

struct grammar_vocab *grammar_vocab_new(int n_tokens, const char *const *pieces, const size_t *lens,
                                        const uint8_t *kinds) {
    struct grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return moex_errorf("grammar: out of memory"), NULL;
    v->n_tokens = n_tokens;
    size_t total = 0;
    int n_text = 0;
    for (int i = 0; i < n_tokens; i++) {
        if (kinds[i] == GRAMMAR_TOKEN_TEXT && lens[i] > 0) {
            if (lens[i] > UINT16_MAX) {
                grammar_vocab_free(v);
                return moex_errorf("grammar: token %d is %zu bytes long", i, lens[i]), NULL;
            }
            total += lens[i];
            n_text++;
        }
        v->n_ends += kinds[i] == GRAMMAR_TOKEN_END;
    }
    v->kinds = malloc((size_t)n_tokens);
    v->bytes = calloc((size_t)n_tokens, sizeof *v->bytes);
    v->lens = calloc((size_t)n_tokens, sizeof *v->lens);
    v->tok = malloc(sizeof *v->tok * (size_t)(n_text + 1));
    v->ends = malloc(sizeof *v->ends * (size_t)(v->n_ends + 1));
    v->nodes = malloc(sizeof *v->nodes * (total + 1));  /* at most one node per byte */
    v->pool = malloc(total + 1);
    uint32_t *open = malloc(sizeof *open * (UINT16_MAX + 2));   /* the open node at each depth */
    if (!v->kinds || !v->bytes || !v->lens || !v->tok || !v->ends || !v->nodes || !v->pool || !open) goto oom;
    memcpy(v->kinds, kinds, (size_t)n_tokens);
    int k = 0, e = 0;
    size_t used = 0;
    for (int i = 0; i < n_tokens; i++) {
        if (kinds[i] == GRAMMAR_TOKEN_END) v->ends[e++] = i;
        if (kinds[i] != GRAMMAR_TOKEN_TEXT || lens[i] == 0) continue;
        v->bytes[i] = v->pool + used;
        memcpy(v->bytes[i], pieces[i], lens[i]);
        used += lens[i];
        v->lens[i] = (uint32_t)lens[i];
        v->tok[k++] = i;
    }
    struct sort_item *items = malloc(sizeof *items * (size_t)(n_text + 1));
    if (!items) goto oom;
    for (int t = 0; t < n_text; t++) items[t] = (struct sort_item){ v->bytes[v->tok[t]], lens[v->tok[t]], v->tok[t] };
    qsort(items, (size_t)n_text, sizeof *items, by_bytes);
    for (int t = 0; t < n_text; t++) v->tok[t] = items[t].id;
    free(items);
    /* Preorder: a token adds the nodes of its bytes past the prefix it
     * shares with the token before it; a node's subtree ends when a later
     * token diverges at or above its depth. */
    uint32_t depth = 0;   /* open nodes: open[1..depth] */
    const char *prev = NULL;
    size_t prev_len = 0;
    for (int t = 0; t < n_text; t++) {
        int32_t id = v->tok[t];
        const char *s = v->bytes[id];
        size_t len = lens[id], common = 0;
        while (prev && common < len && common < prev_len && s[common] == prev[common]) common++;
        for (; depth > common; depth--) v->nodes[open[depth]].skip = v->n_nodes;
        for (size_t d = common; d < len; d++) {
            uint32_t n = v->n_nodes++;
            v->nodes[n] = (struct tnode){ 0, (uint32_t)t, 0, (uint16_t)(d + 1), (uint8_t)s[d] };
            open[++depth] = n;
            if (depth > v->max_depth) v->max_depth = (uint16_t)depth;
        }
        v->nodes[open[depth]].tok_n++;   /* equal byte strings are neighbours: the range stays whole */
        prev = s;
        prev_len = len;
    }
    for (; depth > 0; depth--) v->nodes[open[depth]].skip = v->n_nodes;
    free(open);
    v->n_text = n_text;
    /* each subtree's bytes, children before parents (a child comes after its
     * parent in preorder); whether each token's bytes from each offset on are
     * whole characters (from the end back) */
    v->ascii = calloc(v->n_nodes + 1, sizeof *v->ascii);
    v->shape = calloc(v->n_nodes + 1, 1);
    uint8_t *whole_from = malloc(used + 1);   /* parallel to pool */
    if (!v->ascii || !v->shape || !whole_from) {
        free(whole_from);
        goto oom_after;
    }
    for (int t = 0; t < n_text; t++) {
        const uint8_t *p = (const uint8_t *)v->bytes[v->tok[t]];
        uint8_t *w = whole_from + (v->bytes[v->tok[t]] - v->pool);
        int len = (int)v->lens[v->tok[t]];
        for (int k = len - 1; k >= 0; k--) {
            int n = p[k] < 0x80 ? 1 : p[k] >= 0xC2 && p[k] <= 0xDF ? 2 : p[k] >= 0xE0 && p[k] <= 0xEF ? 3 :
                    p[k] >= 0xF0 && p[k] <= 0xF4 ? 4 : 0;
            bool ok = n > 0 && k + n <= len && (k + n == len || w[k + n]);
            uint32_t c = n == 1 ? p[k] : (uint32_t)(p[k] & (0x7F >> n));
            for (int j = 1; ok && j < n; j++) {
                ok = (p[k + j] & 0xC0) == 0x80;
                c = c << 6 | (p[k + j] & 0x3F);
            }
            uint32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : n == 4 ? 0x10000 : 0;
            w[k] = ok && c >= least && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
        }
    }
    for (uint32_t i = v->n_nodes; i-- > 0;) {
        struct tnode *nd = &v->nodes[i];
        if (nd->byte < 0x80) v->ascii[i][nd->byte >> 6] |= 1ull << (nd->byte & 63);
        else v->shape[i] |= SUBTREE_NON_ASCII;
        for (uint32_t c = i + 1; c < nd->skip; c = v->nodes[c].skip) {
            v->ascii[i][0] |= v->ascii[c][0];
            v->ascii[i][1] |= v->ascii[c][1];
            v->shape[i] |= v->shape[c] & SUBTREE_NON_ASCII;
        }
        uint32_t end = nd->skip < v->n_nodes ? v->nodes[nd->skip].tok_first : (uint32_t)n_text;
        bool whole = true;
        for (uint32_t t = nd->tok_first; whole && t < end; t++)
            whole = whole_from[(v->bytes[v->tok[t]] - v->pool) + nd->depth - 1];
        if (whole) v->shape[i] |= SUBTREE_WHOLE;
    }
    free(whole_from);
    return v;
oom_after:
    grammar_vocab_free(v);
    return moex_errorf("grammar: out of memory"), NULL;
oom:
    free(open);
    grammar_vocab_free(v);
    return moex_errorf("grammar: out of memory"), NULL;
}

int grammar_vocab_n_tokens(const struct grammar_vocab *v) { return v->n_tokens; }
int grammar_vocab_n_nodes(const struct grammar_vocab *v) { return (int)v->n_nodes; }

/* The walk's states, each met once: inside a JSON string every character
 * leads back to the same state, so the step of a (state, byte) pair is
 * computed once per walk and looked up for the other ~150k tokens. */
#define STEP_UNKNOWN (-1)
#define STEP_REFUSED (-2)

struct walk {
    struct gstate *states;     /* (cap) n distinct states, their tops sorted */
    uint64_t (*loops)[2];      /* (cap) per state: the ASCII bytes that lead back to it (made on first use) */
    bool *loops_known;         /* (cap) */
    int8_t *absorbs;           /* (cap) per state: every character past ASCII leads back to it (1), not (0), unknown (-1) */
    uint32_t n, cap;
    int32_t **next;            /* (cap) per state: the state after each byte, made on first use */
    uint32_t *buckets;         /* (n_buckets) hash chains of states through chain[] */
    uint32_t *chain;
    uint32_t n_buckets;
};

static uint32_t state_hash(const struct garena *a, const struct gstate *s) {
    uint64_t h = (uint64_t)s->accepting | (uint64_t)s->utf8_need << 1 | (uint64_t)s->utf8_len << 4 |
                 (uint64_t)s->utf8_value << 8;
    for (uint32_t i = 0; i < s->n; i++) h = (h ^ a->tops[s->first + i]) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int cmp_u32(const void *x, const void *y) {
    uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
    return p < q ? -1 : p > q;
}

/* A state with no stack tops (a grammar that only accepts the empty
 * string, e.g. "root ::=") may have no tops array at all: a NULL base with a
 * count of 0 must not be offset nor reach qsort, memcmp or memcpy. */
static void sort_tops(uint32_t *base, uint32_t first, uint32_t n) {
    if (n > 1) qsort(base + first, n, sizeof *base, cmp_u32);
}

static bool same_tops(const uint32_t *x, uint32_t x_first, const uint32_t *y, uint32_t y_first, uint32_t n) {
    return n == 0 || memcmp(x + x_first, y + y_first, sizeof *x * n) == 0;
}

static void copy_tops(uint32_t *to, const uint32_t *from, uint32_t first, uint32_t n) {
    if (n) memcpy(to, from + first, sizeof *to * n);
}

static bool same_state(const struct garena *a, const struct gstate *x, const struct gstate *y) {
    return x->n == y->n && x->accepting == y->accepting && x->utf8_need == y->utf8_need &&
           x->utf8_len == y->utf8_len && x->utf8_value == y->utf8_value &&
           same_tops(a->tops, x->first, a->tops, y->first, x->n);
}

/* The id of state s (its tops at the end of a->tops): an equal one met
 * before (s's tops are then dropped), or s as a new one. -1: out of memory. */
static int32_t intern(struct walk *w, struct garena *a, struct gstate *s) {
    sort_tops(a->tops, s->first, s->n);
    uint32_t h = state_hash(a, s);
    for (uint32_t i = w->n_buckets ? w->buckets[h & (w->n_buckets - 1)] : GRAMMAR_NONE; i != GRAMMAR_NONE; i = w->chain[i]) {
        if (same_state(a, &w->states[i], s)) {
            a->n_tops = s->first;
            return (int32_t)i;
        }
    }
    if (w->n == w->cap) {
        uint32_t cap = w->cap ? w->cap * 2 : 64;
        struct gstate *st = realloc(w->states, sizeof *st * cap);
        if (st) w->states = st;
        int32_t **nx = realloc(w->next, sizeof *nx * cap);
        if (nx) w->next = nx;
        uint32_t *ch = realloc(w->chain, sizeof *ch * cap);
        if (ch) w->chain = ch;
        uint64_t (*lp)[2] = realloc(w->loops, sizeof *lp * cap);
        if (lp) w->loops = lp;
        bool *lk = realloc(w->loops_known, sizeof *lk * cap);
        if (lk) w->loops_known = lk;
        int8_t *ab = realloc(w->absorbs, sizeof *ab * cap);
        if (ab) w->absorbs = ab;
        uint32_t *b = malloc(sizeof *b * cap * 2);
        if (!st || !nx || !ch || !lp || !lk || !ab || !b) { free(b); return -1; }
        free(w->buckets);
        w->buckets = b;
        w->n_buckets = cap * 2;
        w->cap = cap;
        for (uint32_t i = 0; i < w->n_buckets; i++) w->buckets[i] = GRAMMAR_NONE;
        for (uint32_t i = 0; i < w->n; i++) {
            uint32_t k = state_hash(a, &w->states[i]) & (w->n_buckets - 1);
            w->chain[i] = w->buckets[k];
            w->buckets[k] = i;
        }
    }
    uint32_t id = w->n++;
    w->states[id] = *s;
    w->next[id] = NULL;
    w->loops_known[id] = false;
    w->absorbs[id] = -1;
    w->chain[id] = w->buckets[h & (w->n_buckets - 1)];
    w->buckets[h & (w->n_buckets - 1)] = id;
    return (int32_t)id;
}

/* The state after byte b from state `from`: an id, or STEP_REFUSED. */
static int32_t walk_step(struct walk *w, struct grammar_matcher *m, int32_t from, uint8_t b) {
    if (!w->next[from]) {
        if (!(w->next[from] = malloc(sizeof **w->next * 256))) return STEP_REFUSED;
        for (int i = 0; i < 256; i++) w->next[from][i] = STEP_UNKNOWN;
    }
    int32_t to = w->next[from][b];
    if (to != STEP_UNKNOWN) return to;
    struct gstate s, src = w->states[from];
    /* (out of memory reads as a refusal: fewer tokens allowed, never a wrong one) */
    to = grammar_step(m->g, &m->a, &src, b, &s) ? intern(w, &m->a, &s) : STEP_REFUSED;
    if (to < 0) to = STEP_REFUSED;
    return w->next[from][b] = to;
}

static void walk_free(struct walk *w) {
    for (uint32_t i = 0; i < w->n; i++) free(w->next[i]);
    free(w->loops);
    free(w->loops_known);
    free(w->absorbs);
    free(w->states);
    free(w->next);
    free(w->chain);
    free(w->buckets);
}

static int cmp_cut(const void *x, const void *y) { return cmp_u32(x, y); }

/* Whether every character past ASCII leads from state id back to itself:
 * the step of a character depends only on which of the stacks' sets hold
 * it, so one character per interval between the sets' range ends decides. */
static bool absorbs_non_ascii(struct walk *w, struct grammar_matcher *m, int32_t id) {
    if (w->absorbs[id] >= 0) return w->absorbs[id];
    const struct grammar *g = m->g;
    uint32_t cuts[72], n = 0;
    cuts[n++] = 0x80;
    cuts[n++] = 0xD800;
    cuts[n++] = 0xE000;
    cuts[n++] = GRAMMAR_MAX_CODEPOINT + 1;
    const struct gstate s = w->states[id];
    bool ok = s.utf8_need == 0;
    for (uint32_t i = 0; ok && i < s.n; i++) {
        const struct gset *set = &g->sets[g->elems[m->a.nodes[m->a.tops[s.first + i]].pos].arg];
        for (uint32_t r = 0; ok && r < set->n; r++) {
            for (int e = 0; e < 2; e++) {
                uint32_t cut = e == 0 ? g->ranges[set->first + r][0] : g->ranges[set->first + r][1] + 1;
                if (cut <= 0x80 || cut > GRAMMAR_MAX_CODEPOINT) continue;
                if (n == sizeof cuts / sizeof cuts[0]) { ok = false; break; }   /* too many to try: walk */
                cuts[n++] = cut;
            }
        }
    }
    qsort(cuts, n, sizeof *cuts, cmp_cut);
    for (uint32_t i = 0; ok && i + 1 < n; i++) {
        uint32_t c = cuts[i];
        if (c == cuts[i + 1] || (c >= 0xD800 && c < 0xE000)) continue;
        uint8_t b[4];
        int len = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        b[0] = (uint8_t)(len == 2 ? 0xC0 | c >> 6 : len == 3 ? 0xE0 | c >> 12 : 0xF0 | c >> 18);
        for (int k = 1; k < len; k++) b[k] = (uint8_t)(0x80 | (c >> (6 * (len - 1 - k)) & 0x3F));
        int32_t at = id;
        for (int k = 0; k < len && at >= 0; k++) at = walk_step(w, m, at, b[k]);
        ok = at == id;
    }
    w->absorbs[id] = ok;
    return ok;
}

/* Whether node's whole subtree is taken from state id without a walk: its
 * tokens' bytes from the node on are whole characters, each leading the state
 * back to itself. */
static bool takes_subtree(struct walk *w, struct grammar_matcher *m, int32_t id, const uint64_t *ascii, uint8_t shape) {
    if (!(shape & SUBTREE_WHOLE) || w->states[id].utf8_need) return false;
    if (!w->loops_known[id]) {
        w->loops[id][0] = w->loops[id][1] = 0;
        for (int b = 0; b < 128; b++)
            if (walk_step(w, m, id, (uint8_t)b) == id) w->loops[id][b >> 6] |= 1ull << (b & 63);
        w->loops_known[id] = true;
    }
    if ((ascii[0] & ~w->loops[id][0]) != 0 || (ascii[1] & ~w->loops[id][1]) != 0) return false;
    return !(shape & SUBTREE_NON_ASCII) || absorbs_non_ascii(w, m, id);
}

int grammar_mask(struct grammar_matcher *m, const struct grammar_vocab *v, uint8_t *allowed) {
    memset(allowed, 0, (size_t)v->n_tokens);
    struct garena *a = &m->a;
    uint32_t keep_nodes = a->n, keep_tops = a->n_tops;
    struct walk w = { 0 };
    int32_t *st = malloc(sizeof *st * ((size_t)v->max_depth + 1));
    /* the walk's states keep their tops after the matcher's */
    struct gstate root = m->cur;
    bool ok = st != NULL;
    for (uint32_t i = 0; ok && i < root.n; i++) ok = grammar_push_top(a, a->tops[m->cur.first + i]);
    root.first = keep_tops;
    if (ok) ok = (st[0] = intern(&w, a, &root)) >= 0;
    if (!ok) {
        free(st);
        walk_free(&w);
        a->n_tops = keep_tops;
        return moex_errorf("grammar: out of memory"), -1;
    }
    int n_allowed = 0;
    for (uint32_t i = 0; i < v->n_nodes;) {
        const struct tnode *n = &v->nodes[i];
        if (takes_subtree(&w, m, st[n->depth - 1], v->ascii[i], v->shape[i])) {
            /* the subtree's tokens are contiguous in trie order */
            uint32_t end = n->skip < v->n_nodes ? v->nodes[n->skip].tok_first : (uint32_t)v->n_text;
            for (uint32_t t = n->tok_first; t < end; t++) allowed[v->tok[t]] = 1;
            n_allowed += (int)(end - n->tok_first);
            i = n->skip;
            continue;
        }
        int32_t to = walk_step(&w, m, st[n->depth - 1], n->byte);
        if (to == STEP_REFUSED) {
            i = n->skip;
            continue;
        }
        st[n->depth] = to;
        for (uint32_t t = 0; t < n->tok_n; t++) allowed[v->tok[n->tok_first + t]] = 1;
        n_allowed += (int)n->tok_n;
        i = w.states[to].n == 0 ? n->skip : i + 1;   /* nothing can follow: skip the longer tokens */
    }
    walk_free(&w);
    free(st);
    grammar_arena_rollback(a, keep_nodes);
    a->n_tops = keep_tops;
    if (grammar_matcher_can_end(m) || n_allowed == 0) {
        for (int e = 0; e < v->n_ends; e++) allowed[v->ends[e]] = 1;
        n_allowed += v->n_ends;
    }
    return n_allowed;
}

int grammar_accept_token(struct grammar_matcher *m, const struct grammar_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_tokens) return moex_errorf("grammar: token %d is out of range", id);
    if (v->kinds[id] == GRAMMAR_TOKEN_END) return 0;
    if (v->kinds[id] != GRAMMAR_TOKEN_TEXT || v->lens[id] == 0)
        return moex_errorf("grammar: token %d cannot be part of a grammar's text", id);
    if (grammar_matcher_accept(m, v->bytes[id], v->lens[id]) != 0)
        return moex_errorf("grammar: token %d does not continue the grammar", id);
    return 0;
}

/* Masks of states met before, by state: inside an unbounded string or
 * number every token leads back to the same stacks, so the steps after the
 * first cost a copy. */
#define MASK_CACHE 4

struct cached_mask {
    uint32_t *tops;            /* (n) the state's stacks, sorted; NULL: empty slot */
    struct gstate key;         /* n, accepting and the UTF-8 fields */
    uint32_t generation;
    uint8_t *allowed;          /* (n_tokens) */
    uint64_t used;             /* the step that last used it */
};

struct grammar_sampler {
    struct grammar *g;
    const struct grammar_vocab *v;
    struct grammar_matcher *m;
    uint8_t *allowed;          /* (n_tokens) this step's mask */
    bool dead;                 /* a token the grammar refused was taken */
    struct cached_mask cache[MASK_CACHE];
    uint64_t steps;
    uint32_t *key;             /* (key_cap) the current state's sorted tops */
    uint32_t key_cap;
};

struct grammar_sampler *grammar_sampler_new(struct grammar *g, const struct grammar_vocab *v) {
    struct grammar_sampler *gs = calloc(1, sizeof *gs);
    if (!gs) {
        grammar_free(g);
        return moex_errorf("grammar: out of memory"), NULL;
    }
    gs->g = g;
    gs->v = v;
    gs->m = grammar_matcher_new(g);
    gs->allowed = malloc((size_t)v->n_tokens);
    if (!gs->m || !gs->allowed) {
        grammar_sampler_free(gs);
        return moex_errorf("grammar: out of memory"), NULL;
    }
    return gs;
}

void grammar_sampler_free(struct grammar_sampler *gs) {
    if (!gs) return;
    for (int i = 0; i < MASK_CACHE; i++) {
        free(gs->cache[i].tops);
        free(gs->cache[i].allowed);
    }
    free(gs->key);
    grammar_matcher_free(gs->m);
    grammar_free(gs->g);
    free(gs->allowed);
    free(gs);
}

static bool same_key(const struct cached_mask *c, const struct gstate *s, const uint32_t *tops, uint32_t generation) {
    return c->tops && c->generation == generation && c->key.n == s->n && c->key.accepting == s->accepting &&
           c->key.utf8_need == s->utf8_need && c->key.utf8_len == s->utf8_len && c->key.utf8_value == s->utf8_value &&
           same_tops(c->tops, 0, tops, 0, s->n);
}

/* This step's mask into gs->allowed: from the cache, or walked and cached. */
static int step_mask(struct grammar_sampler *gs) {
    const struct grammar_vocab *v = gs->v;
    struct grammar_matcher *m = gs->m;
    const struct gstate *s = &m->cur;
    gs->steps++;
    if (s->n + 1 > gs->key_cap) {
        uint32_t *k = realloc(gs->key, sizeof *k * (s->n + 1));
        if (!k) return grammar_mask(m, v, gs->allowed) < 0 ? -1 : 0;
        gs->key = k;
        gs->key_cap = s->n + 1;
    }
    copy_tops(gs->key, m->a.tops, s->first, s->n);
    sort_tops(gs->key, 0, s->n);
    struct cached_mask *victim = &gs->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        struct cached_mask *c = &gs->cache[i];
        if (same_key(c, s, gs->key, m->generation)) {
            c->used = gs->steps;
            memcpy(gs->allowed, c->allowed, (size_t)v->n_tokens);
            return 0;
        }
        if (c->used < victim->used) victim = c;
    }
    if (grammar_mask(m, v, gs->allowed) < 0) return -1;
    uint32_t *tops = realloc(victim->tops, sizeof *tops * (s->n + 1));
    if (tops) victim->tops = tops;
    if (!victim->allowed) victim->allowed = malloc((size_t)v->n_tokens);
    if (!tops || !victim->allowed) return 0;   /* not cached: fine */
    copy_tops(victim->tops, gs->key, 0, s->n);
    victim->key = *s;
    victim->generation = m->generation;
    victim->used = gs->steps;
    memcpy(victim->allowed, gs->allowed, (size_t)v->n_tokens);
    return 0;
}

int grammar_sampler_apply(struct grammar_sampler *gs, float *logits, int n_vocab) {
    const struct grammar_vocab *v = gs->v;
    if (gs->dead) {
        memset(gs->allowed, 0, (size_t)v->n_tokens);
        for (int e = 0; e < v->n_ends; e++) gs->allowed[v->ends[e]] = 1;
    } else if (step_mask(gs) < 0) {
        return -1;
    }
    int n = n_vocab < v->n_tokens ? n_vocab : v->n_tokens;
    for (int i = 0; i < n; i++)
        if (!gs->allowed[i]) logits[i] = -INFINITY;
    for (int i = n; i < n_vocab; i++) logits[i] = -INFINITY;   /* ids past the vocabulary's */
    return 0;
}

int grammar_sampler_accept(struct grammar_sampler *gs, int32_t id) {
    if (gs->dead) return -1;
    if (grammar_accept_token(gs->m, gs->v, id) == 0) return 0;
    gs->dead = true;
    return -1;
}
