/* Tokens and text for the public API: encoding with BOS, streaming decode,
 * chat templates. */
#include "api/api_impl.h"

#include "text/chat.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const struct tokenizer *need_tok(const moex_model *m, const char *function) {
    if (!m) return api_null(function, "m"), NULL;
    if (!m->model->tok) moex_errorf("the model has no tokenizer");
    return m->model->tok;
}

bool moex_model_has_tokenizer(const moex_model *m) {
    API_CHECK(m, false);
    return m->model->tok != NULL;
}

static bool wants_bos(const struct tokenizer *t, bool add_bos) {
    return add_bos && tokenizer_add_bos(t) && tokenizer_bos(t) >= 0;
}

int moex_tokenize(const moex_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                  int32_t *out, int max_out) {
    const struct tokenizer *t = need_tok(m, __func__);
    if (!t) return -1;
    if (!text && len) return api_null(__func__, "text"), -1;
    if (!out && max_out > 0) return api_null(__func__, "out"), -1;
    int bos = wants_bos(t, add_bos);
    if (bos && max_out < 1) return moex_errorf("1 token does not fit in 0"), -1;
    if (bos) out[0] = tokenizer_bos(t);
    int n = tokenizer_encode(t, text, len, parse_special, out + bos, max_out - bos);
    return n < 0 ? -1 : n + bos;
}

int32_t *moex_tokenize_alloc(const moex_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                             int *n_out) {
    const struct tokenizer *t = need_tok(m, __func__);
    if (!t) return NULL;
    if (!text && len) return api_null(__func__, "text"), NULL;
    API_CHECK(n_out, NULL);
    int n = 0;
    int32_t *ids = tokenizer_encode_alloc(t, text, len, parse_special, &n);
    if (!ids) return NULL;
    if (wants_bos(t, add_bos)) {
        int32_t *with = realloc(ids, sizeof *ids * (size_t)(n + 1));
        if (!with) { free(ids); return moex_errorf("out of memory"), NULL; }
        memmove(with + 1, with, sizeof *with * (size_t)n);
        with[0] = tokenizer_bos(t);
        ids = with;
        n++;
    }
    *n_out = n;
    return ids;
}

char *moex_detokenize(const moex_model *m, const int32_t *ids, int n, size_t *len) {
    const struct tokenizer *t = need_tok(m, __func__);
    if (!t) return NULL;
    if (!ids && n > 0) return api_null(__func__, "ids"), NULL;
    return tokenizer_decode_alloc(t, ids, n, len);
}

bool moex_token_is_eog(const moex_model *m, int32_t id) {
    API_CHECK(m, false);
    return m->model->tok && tokenizer_is_eog(m->model->tok, id);
}

int32_t moex_token_bos(const moex_model *m) {
    API_CHECK(m, -1);
    return m->model->tok ? tokenizer_bos(m->model->tok) : -1;
}

int32_t moex_token_eos(const moex_model *m) {
    API_CHECK(m, -1);
    return m->model->tok ? tokenizer_eos(m->model->tok) : -1;
}

struct moex_decoder {
    const struct tokenizer *tok;
    struct tokenizer_stream stream;
    size_t cap;
    char buf[];                        /* (cap) */
};

moex_decoder *moex_decoder_new(const moex_model *m) {
    const struct tokenizer *t = need_tok(m, __func__);
    if (!t) return NULL;
    size_t cap = tokenizer_stream_bound(t) + 8;
    moex_decoder *d = malloc(sizeof *d + cap);
    if (!d) return moex_errorf("out of memory"), NULL;
    d->tok = t;
    d->cap = cap;
    tokenizer_stream_init(&d->stream);
    return d;
}

void moex_decoder_free(moex_decoder *d) { free(d); }

const char *moex_decoder_put(moex_decoder *d, int32_t id, size_t *len) {
    API_CHECK(d, NULL);
    API_CHECK(len, NULL);
    int n = tokenizer_stream_put(d->tok, &d->stream, id, d->buf, d->cap);
    if (n < 0) return moex_errorf("token %d is not in the vocabulary", (int)id), NULL;
    *len = (size_t)n;
    return d->buf;
}

const char *moex_decoder_flush(moex_decoder *d, size_t *len) {
    API_CHECK(d, NULL);
    API_CHECK(len, NULL);
    *len = (size_t)tokenizer_stream_flush(&d->stream, d->buf, d->cap);
    return d->buf;
}

static enum chat_format model_format(const moex_model *m) {
    return m->model->tok ? chat_format_detect(tokenizer_chat_template(m->model->tok)) : CHAT_FORMAT_UNKNOWN;
}

bool moex_chat_template_known(const moex_model *m) {
    API_CHECK(m, false);
    return model_format(m) != CHAT_FORMAT_UNKNOWN;
}

char *moex_chat_apply(const moex_model *m, const struct moex_chat_message *msgs, int n, bool add_generation_prompt,
                      bool enable_thinking, size_t *len) {
    API_CHECK(m, NULL);
    if (!msgs && n > 0) return api_null(__func__, "msgs"), NULL;
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return moex_errorf("moex_chat_apply: message %d has no %s (NULL)", i, msgs[i].role ? "content" : "role"),
                   NULL;
    enum chat_format fmt = model_format(m);
    if (fmt == CHAT_FORMAT_UNKNOWN) fmt = CHAT_FORMAT_CHATML;
    struct chat_message *cm = malloc(sizeof *cm * (size_t)(n > 0 ? n : 1));
    if (!cm) return moex_errorf("out of memory"), NULL;
    for (int i = 0; i < n; i++) cm[i] = (struct chat_message){ msgs[i].role, msgs[i].content };
    char *text = chat_render(fmt, cm, n, add_generation_prompt, enable_thinking, len);
    free(cm);
    return text;
}

const char *moex_token_piece(const moex_model *m, int32_t id, size_t *len) {
    const struct tokenizer *t = need_tok(m, __func__);
    if (!t) return NULL;
    API_CHECK(len, NULL);
    return tokenizer_decode_token(t, id, len);
}

bool moex_token_is_normal(const moex_model *m, int32_t id) {
    API_CHECK(m, false);
    const struct tokenizer *t = m->model->tok;
    return !t || id < 0 || id >= tokenizer_n_vocab(t) || tokenizer_token_type(t, id) == TOKEN_NORMAL;
}
