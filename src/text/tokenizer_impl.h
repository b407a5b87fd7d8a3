/* Inside the tokenizer: the tables tokenizer_load builds and the encoder and
 * decoder read. Not for use outside src/text/. */
#ifndef MOEX_TEXT_TOKENIZER_IMPL_H
#define MOEX_TEXT_TOKENIZER_IMPL_H

#include "text/pretok.h"
#include "text/tokenizer.h"

#define TOKENIZER_MAX_EOG 8

/* One merge "a b" of rank `rank` that makes token `result`. */
struct merge_slot {
    uint64_t pair;          /* (uint64_t)a << 32 | b */
    int32_t rank;           /* -1: empty slot */
    int32_t result;
};

struct tokenizer {
    int32_t n_vocab;
    enum pretok_kind pretok;
    bool ignore_merges;     /* a piece that is a whole token is taken as is (Llama 3) */

    char *text;             /* every token's stored text, each NUL-terminated */
    uint32_t *text_off;     /* (n_vocab + 1) start of token i's text in `text` */
    char *piece;            /* every token's decoded bytes */
    uint32_t *piece_off;    /* (n_vocab + 1) start of token i's bytes in `piece` */
    size_t max_piece;       /* longest decoded token, bytes */
    uint8_t *type;          /* (n_vocab) enum token_type */

    int32_t *text_index;    /* (text_mask + 1) open addressing: token id or -1 */
    uint32_t text_mask;
    struct merge_slot *merges; /* (merge_mask + 1) open addressing on pair */
    uint32_t merge_mask;
    int32_t byte_token[256];   /* the token of each single byte */

    int32_t *specials;      /* (n_specials) control/unknown/user-defined ids, longest text first */
    int n_specials;

    int32_t bos, eos, eot, pad;
    bool add_bos;
    int32_t eog[TOKENIZER_MAX_EOG];
    int n_eog;
    char *chat_template;
};

static inline size_t tok_text_len(const struct tokenizer *t, int32_t id) {
    return t->text_off[id + 1] - t->text_off[id] - 1;
}

static inline uint64_t tok_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The merge of tokens a and b, or NULL. */
static inline const struct merge_slot *tok_find_merge(const struct tokenizer *t, int32_t a, int32_t b) {
    uint64_t pair = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = (uint32_t)tok_mix64(pair) & t->merge_mask;
    for (;;) {
        const struct merge_slot *m = &t->merges[i];
        if (m->rank < 0) return NULL;
        if (m->pair == pair) return m;
        i = (i + 1) & t->merge_mask;
    }
}

#endif
