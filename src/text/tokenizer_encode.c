/* tokenizer_encode: special tokens split out first, then the pre-tokenizer's
 * pieces, each turned into ids by BPE merges in rank order.
 *
 * BPE runs on a linked list of symbols with a binary heap of candidate pairs
 * keyed (rank, position), so a piece of n bytes costs O(n log n): a 1 MB word
 * is no worse than a million short ones. Pairs are looked up by token ids
 * (merge_slot), never by text, and stale heap entries are skipped when popped. */
#include "text/tokenizer_impl.h"

#include "core/error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct ids {
    int32_t *v;
    size_t n, cap;
};

static int ids_push(struct ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return moex_errorf("tokenizer: out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

/* A candidate merge of the adjacent symbols left and right. Kept to 16 bytes:
 * the heap is where the time goes on long pieces. */
struct bigram {
    uint64_t order;         /* rank << 32 | left: lowest rank first, then leftmost */
    int32_t right;
    uint32_t bytes;         /* bytes of left + right when queued: detects stale entries */
};

struct bpe_work {
    const struct tokenizer *t;
    struct ids *out;
    size_t cap;             /* symbols the arrays below hold */
    int32_t *sym_id;        /* (cap) token of each symbol */
    uint32_t *sym_bytes;    /* (cap) 0 once merged into its left neighbour */
    int32_t *prev, *next;   /* (cap) list links, -1 at the ends */
    struct bigram *heap;    /* (heap_cap) min-heap on (rank, left) */
    size_t heap_n, heap_cap;
    char *alphabet;         /* (alphabet_cap) piece in the byte alphabet, for ignore_merges */
    size_t alphabet_cap;
};

static bool bigram_before(const struct bigram *a, const struct bigram *b) {
    return a->order < b->order;
}

static int heap_push(struct bpe_work *w, struct bigram g) {
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        struct bigram *h = realloc(w->heap, cap * sizeof *h);
        if (!h) return moex_errorf("tokenizer: out of memory");
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&g, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = g;
    return 0;
}

static struct bigram heap_pop(struct bpe_work *w) {
    struct bigram top = w->heap[0];
    struct bigram last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && bigram_before(&w->heap[child + 1], &w->heap[child])) child++;
        if (!bigram_before(&w->heap[child], &last)) break;
        w->heap[i] = w->heap[child];
        i = child;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static int queue_pair(struct bpe_work *w, int32_t left, int32_t right) {
    const struct merge_slot *m = tok_find_merge(w->t, w->sym_id[left], w->sym_id[right]);
    if (!m) return 0;
    struct bigram g = {(uint64_t)(uint32_t)m->rank << 32 | (uint32_t)left, right,
                       w->sym_bytes[left] + w->sym_bytes[right]};
    return heap_push(w, g);
}

static int reserve_symbols(struct bpe_work *w, size_t n) {
    if (n <= w->cap) return 0;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < n) cap *= 2;
    int32_t *sym_id = realloc(w->sym_id, cap * sizeof *sym_id);
    if (sym_id) w->sym_id = sym_id;
    uint32_t *sym_bytes = realloc(w->sym_bytes, cap * sizeof *sym_bytes);
    if (sym_bytes) w->sym_bytes = sym_bytes;
    int32_t *prev = realloc(w->prev, cap * sizeof *prev);
    if (prev) w->prev = prev;
    int32_t *next = realloc(w->next, cap * sizeof *next);
    if (next) w->next = next;
    if (!sym_id || !sym_bytes || !prev || !next) return moex_errorf("tokenizer: out of memory");
    w->cap = cap;
    return 0;
}

/* Llama 3 style: a piece that is a whole token skips the merges. */
static int32_t whole_piece_token(struct bpe_work *w, const uint8_t *s, size_t n) {
    if (n * 2 > w->alphabet_cap) {
        char *a = realloc(w->alphabet, n * 2);
        if (!a) return -1;
        w->alphabet = a;
        w->alphabet_cap = n * 2;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += (size_t)utf8_encode(byte_to_unicode(s[i]), w->alphabet + len);
    return tokenizer_find(w->t, w->alphabet, len);
}

/* pretok_emit_fn: BPE over one piece's bytes. */
static int bpe_piece(void *ctx, const char *piece, size_t n) {
    struct bpe_work *w = ctx;
    const struct tokenizer *t = w->t;
    const uint8_t *s = (const uint8_t *)piece;
    if (n == 1) return ids_push(w->out, t->byte_token[s[0]]);
    if (n > INT32_MAX) return moex_errorf("tokenizer: a piece of %zu bytes is too long", n);
    if (t->ignore_merges) {
        int32_t id = whole_piece_token(w, s, n);
        if (id >= 0) return ids_push(w->out, id);
    }
    if (reserve_symbols(w, n)) return -1;
    for (size_t i = 0; i < n; i++) {
        w->sym_id[i] = t->byte_token[s[i]];
        w->sym_bytes[i] = 1;
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (queue_pair(w, (int32_t)i, (int32_t)i + 1)) return -1;
    while (w->heap_n > 0) {
        struct bigram g = heap_pop(w);
        int32_t l = (int32_t)(uint32_t)g.order, r = g.right;
        if (w->sym_bytes[l] == 0 || w->sym_bytes[r] == 0 || w->next[l] != r ||
            w->sym_bytes[l] + w->sym_bytes[r] != g.bytes)
            continue;   /* stale: one side has merged since */
        w->sym_id[l] = tok_find_merge(t, w->sym_id[l], w->sym_id[r])->result;
        w->sym_bytes[l] = g.bytes;
        w->sym_bytes[r] = 0;
        w->next[l] = w->next[r];
        if (w->next[r] >= 0) w->prev[w->next[r]] = l;
        if (w->prev[l] >= 0 && queue_pair(w, w->prev[l], l)) return -1;
        if (w->next[l] >= 0 && queue_pair(w, l, w->next[l])) return -1;
    }
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (ids_push(w->out, w->sym_id[i])) return -1;
    return 0;
}

/* A stretch of the input: raw text, or one special token found in it. */
struct frag {
    size_t start, len;
    int32_t special;        /* token id, or -1 for raw text */
};

struct frags {
    struct frag *v;
    size_t n, cap;
};

static int frags_push(struct frags *a, size_t start, size_t len, int32_t special) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct frag *v = realloc(a->v, cap * sizeof *v);
        if (!v) return moex_errorf("tokenizer: out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = (struct frag){start, len, special};
    return 0;
}

/* Splits every raw fragment of `in` at the occurrences of token id. */
static int split_at_special(const struct tokenizer *t, const char *text, int32_t id,
                            const struct frags *in, struct frags *out) {
    const char *tok = t->text + t->text_off[id];
    size_t tok_len = tok_text_len(t, id);
    out->n = 0;
    for (size_t f = 0; f < in->n; f++) {
        struct frag fr = in->v[f];
        if (fr.special >= 0) {
            if (frags_push(out, fr.start, fr.len, fr.special)) return -1;
            continue;
        }
        size_t end = fr.start + fr.len, raw = fr.start, p = fr.start;
        while (end - p >= tok_len) {
            const char *q = memchr(text + p, (unsigned char)tok[0], end - p - tok_len + 1);
            if (!q) break;
            size_t at = (size_t)(q - text);
            if (memcmp(q, tok, tok_len) != 0) {
                p = at + 1;
                continue;
            }
            if (at > raw && frags_push(out, raw, at - raw, -1)) return -1;
            if (frags_push(out, at, tok_len, id)) return -1;
            raw = p = at + tok_len;
        }
        if (end > raw && frags_push(out, raw, end - raw, -1)) return -1;
    }
    return 0;
}

static int encode_into(const struct tokenizer *t, const char *text, size_t len, bool parse_special,
                       struct ids *out) {
    struct frags a = {0}, b = {0};
    struct bpe_work w = {.t = t, .out = out};
    int rc = 0;
    if (len > 0) rc = frags_push(&a, 0, len, -1);
    for (int i = 0; i < t->n_specials && rc == 0; i++) {
        int32_t id = t->specials[i];
        if (!parse_special && t->type[id] != TOKEN_USER_DEFINED) continue;
        rc = split_at_special(t, text, id, &a, &b);
        struct frags tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t f = 0; f < a.n && rc == 0; f++) {
        const struct frag *fr = &a.v[f];
        if (fr->special >= 0) rc = ids_push(out, fr->special);
        else rc = pretok_split(t->pretok, text + fr->start, fr->len, bpe_piece, &w);
    }
    free(a.v);
    free(b.v);
    free(w.sym_id);
    free(w.sym_bytes);
    free(w.prev);
    free(w.next);
    free(w.heap);
    free(w.alphabet);
    if (rc == 0 && out->n > INT_MAX) rc = moex_errorf("tokenizer: more than %d tokens", INT_MAX);
    return rc;
}

int32_t *tokenizer_encode_alloc(const struct tokenizer *t, const char *text, size_t len,
                                bool parse_special, int *n_out) {
    struct ids out = {0};
    *n_out = 0;
    if (!text && len > 0) {
        moex_errorf("tokenizer: no text");
        return NULL;
    }
    if (encode_into(t, text, len, parse_special, &out) != 0 || ids_push(&out, 0) != 0) {
        free(out.v);
        return NULL;
    }
    /* The pushed 0 only guarantees a non-NULL array for empty input. */
    *n_out = (int)(out.n - 1);
    return out.v;
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool parse_special,
                     int32_t *out, int max_out) {
    int n;
    int32_t *ids = tokenizer_encode_alloc(t, text, len, parse_special, &n);
    if (!ids) return -1;
    if (n > max_out) {
        free(ids);
        return moex_errorf("tokenizer: the text needs %d tokens, room for %d", n, max_out);
    }
    if (n > 0) memcpy(out, ids, (size_t)n * sizeof *ids);
    free(ids);
    return n;
}
