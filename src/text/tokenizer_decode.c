/* Token ids back to bytes: one token, a whole sequence, or a stream that
 * only ever prints valid UTF-8. The bytes of every token were decoded once,
 * at load (tokenizer_load.c: build_pieces). */
#include "text/tokenizer_impl.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

const char *tokenizer_decode_token(const struct tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        moex_errorf("tokenizer: token id %d is out of range (vocabulary of %d)", id, t->n_vocab);
        return NULL;
    }
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

char *tokenizer_decode_alloc(const struct tokenizer *t, const int32_t *ids, int n, size_t *len) {
    size_t total = 0, piece_len;
    for (int i = 0; i < n; i++) {
        if (!tokenizer_decode_token(t, ids[i], &piece_len)) return NULL;
        total += piece_len;
    }
    char *s = malloc(total + 1);
    if (!s) {
        moex_errorf("tokenizer: out of memory");
        return NULL;
    }
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        const char *p = tokenizer_decode_token(t, ids[i], &piece_len);
        memcpy(s + w, p, piece_len);
        w += piece_len;
    }
    s[w] = 0;
    if (len) *len = w;
    return s;
}

void tokenizer_stream_init(struct tokenizer_stream *s) { memset(s, 0, sizeof *s); }

size_t tokenizer_stream_bound(const struct tokenizer *t) { return UTF8_STREAM_OUT_MAX(t->max_piece); }

int tokenizer_stream_put(const struct tokenizer *t, struct tokenizer_stream *s, int32_t id,
                         char *out, size_t cap) {
    size_t len;
    const char *p = tokenizer_decode_token(t, id, &len);
    if (!p) return -1;
    if (cap < tokenizer_stream_bound(t))
        return moex_errorf("tokenizer: stream buffer of %zu bytes, %zu needed", cap, tokenizer_stream_bound(t));
    return (int)utf8_stream_put(&s->utf8, (const uint8_t *)p, len, out);
}

int tokenizer_stream_flush(struct tokenizer_stream *s, char *out, size_t cap) {
    if (cap < 3 && s->utf8.n_pending > 0) return moex_errorf("tokenizer: stream buffer of %zu bytes, 3 needed", cap);
    return (int)utf8_stream_flush(&s->utf8, out);
}
