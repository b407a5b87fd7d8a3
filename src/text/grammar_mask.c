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

struct grammar_vocab {
    int n_tokens;
    struct tnode *nodes;       /* (n_nodes) the trie in preorder */
    uint32_t n_nodes;
    int32_t *tok;              /* token ids in trie order */
    uint8_t *kinds;            /* (n_tokens) enum grammar_token_kind */
    char **bytes;              /* (n_tokens) each TEXT token's bytes (its own copy), for accepting */
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
    if (v->bytes)
        for (int i = 0; i < v->n_tokens; i++) free(v->bytes[i]);
    free(v->bytes);
    free(v->lens);
    free(v->nodes);
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
    uint32_t *open = malloc(sizeof *open * (UINT16_MAX + 2));   /* the open node at each depth */
    if (!v->kinds || !v->bytes || !v->lens || !v->tok || !v->ends || !v->nodes || !open) goto oom;
    memcpy(v->kinds, kinds, (size_t)n_tokens);
    int k = 0, e = 0;
    for (int i = 0; i < n_tokens; i++) {
        if (kinds[i] == GRAMMAR_TOKEN_END) v->ends[e++] = i;
        if (kinds[i] != GRAMMAR_TOKEN_TEXT || lens[i] == 0) continue;
        if (!(v->bytes[i] = malloc(lens[i]))) goto oom;
        memcpy(v->bytes[i], pieces[i], lens[i]);
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
    return v;
oom:
    free(open);
    grammar_vocab_free(v);
    return moex_errorf("grammar: out of memory"), NULL;
}

int grammar_vocab_n_tokens(const struct grammar_vocab *v) { return v->n_tokens; }
int grammar_vocab_n_nodes(const struct grammar_vocab *v) { return (int)v->n_nodes; }

int grammar_mask(struct grammar_matcher *m, const struct grammar_vocab *v, uint8_t *allowed) {
    memset(allowed, 0, (size_t)v->n_tokens);
    struct garena *a = &m->a;
    uint32_t keep_nodes = a->n, keep_tops = a->n_tops;
    struct gstate *st = malloc(sizeof *st * ((size_t)v->max_depth + 1));
    if (!st) return moex_errorf("grammar: out of memory"), -1;
    st[0] = m->cur;
    int n_allowed = 0;
    for (uint32_t i = 0; i < v->n_nodes;) {
        const struct tnode *n = &v->nodes[i];
        /* the state of the parent depth ends where this one's begins */
        const struct gstate *from = &st[n->depth - 1];
        a->n_tops = from->first + from->n;
        if (!grammar_step(m->g, a, from, n->byte, &st[n->depth])) {
            i = n->skip;   /* (out of memory reads as a refusal: fewer tokens allowed, never a wrong one) */
            continue;
        }
        for (uint32_t t = 0; t < n->tok_n; t++) allowed[v->tok[n->tok_first + t]] = 1;
        n_allowed += (int)n->tok_n;
        const struct gstate *to = &st[n->depth];
        i = to->n == 0 ? n->skip : i + 1;   /* nothing can follow: skip the longer tokens */
    }
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

struct grammar_sampler {
    struct grammar *g;
    const struct grammar_vocab *v;
    struct grammar_matcher *m;
    uint8_t *allowed;          /* (n_tokens) this step's mask */
    bool dead;                 /* a token the grammar refused was taken */
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
    grammar_matcher_free(gs->m);
    grammar_free(gs->g);
    free(gs->allowed);
    free(gs);
}

int grammar_sampler_apply(struct grammar_sampler *gs, float *logits, int n_vocab) {
    const struct grammar_vocab *v = gs->v;
    if (gs->dead) {
        memset(gs->allowed, 0, (size_t)v->n_tokens);
        for (int e = 0; e < v->n_ends; e++) gs->allowed[v->ends[e]] = 1;
    } else if (grammar_mask(gs->m, v, gs->allowed) < 0) {
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
