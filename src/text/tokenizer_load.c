/* tokenizer_load: validates the GGUF's tokenizer.* keys and builds the
 * lookup tables (token text -> id, merge pair -> rank) and decoded pieces. */
#include "text/tokenizer_impl.h"

#include "core/error.h"
#include "gguf/gguf.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

/* More tokens than this cannot be a real vocabulary, and keeps every size
 * computed below far from overflow. */
#define MAX_VOCAB (1 << 24)
/* Real tokens are at most a few hundred bytes; this bounds stream buffers. */
#define MAX_TOKEN_BYTES (1 << 16)

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a, then mixed */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    return tok_mix64(h ^ n);
}

static uint32_t table_size(uint64_t n) {
    uint32_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

int32_t tokenizer_find(const struct tokenizer *t, const char *text, size_t len) {
    uint32_t i = (uint32_t)hash_bytes(text, len) & t->text_mask;
    for (;;) {
        int32_t id = t->text_index[i];
        if (id < 0) return -1;
        if (tok_text_len(t, id) == len && memcmp(t->text + t->text_off[id], text, len) == 0)
            return id;
        i = (i + 1) & t->text_mask;
    }
}

/* Inserts id; a later token with the same text replaces an earlier one, as
 * in llama.cpp. */
static void index_token(struct tokenizer *t, int32_t id) {
    const char *s = t->text + t->text_off[id];
    size_t len = tok_text_len(t, id);
    uint32_t i = (uint32_t)hash_bytes(s, len) & t->text_mask;
    for (;;) {
        int32_t other = t->text_index[i];
        if (other < 0 || (tok_text_len(t, other) == len && memcmp(t->text + t->text_off[other], s, len) == 0)) {
            t->text_index[i] = id;
            return;
        }
        i = (i + 1) & t->text_mask;
    }
}

/* Element i of an integer array, widened; 0 on success. */
static int array_int(const struct gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p = kv->array_data;
    switch (kv->array_type) {
    case GGUF_U8: *out = p[i]; return 0;
    case GGUF_I8: *out = (int8_t)p[i]; return 0;
    case GGUF_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); *out = v; return 0; }
    case GGUF_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); *out = v; return 0; }
    case GGUF_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); *out = v; return 0; }
    case GGUF_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); *out = v; return 0; }
    case GGUF_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); *out = v; return 0; }
    case GGUF_U64: {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        if (v > INT64_MAX) return -1;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static const struct gguf_kv *find_string_array(const struct gguf_file *f, const char *key) {
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) { moex_errorf("tokenizer: %s is missing", key); return NULL; }
    if (kv->type != GGUF_ARRAY || kv->array_type != GGUF_STRING || !kv->array_strs) {
        moex_errorf("tokenizer: %s is not an array of strings", key);
        return NULL;
    }
    return kv;
}

static int load_pretok(struct tokenizer *t, const struct gguf_file *f) {
    char *model = gguf_get_str(f, KEY_MODEL);
    if (!model) return moex_errorf("tokenizer: %s is missing or not a string", KEY_MODEL);
    int ok = strcmp(model, "gpt2") == 0;
    if (!ok) moex_errorf("tokenizer: model \"%s\" is not supported (only byte-level BPE, \"gpt2\")", model);
    free(model);
    if (!ok) return -1;

    char *pre = gguf_get_str(f, KEY_PRE);
    if (!pre) return moex_errorf("tokenizer: %s is missing or not a string", KEY_PRE);
    int rc = 0;
    if (strcmp(pre, "qwen2") == 0) {
        t->pretok = PRETOK_QWEN2;
    } else if (strcmp(pre, "qwen35") == 0) {
        t->pretok = PRETOK_QWEN35;
    } else if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0) {
        t->pretok = PRETOK_LLAMA3;
        t->ignore_merges = true;
    } else if (strcmp(pre, "lfm2") == 0) {
        /* LFM2 splits as Llama 3 does and starts with BOS unless the file
         * says otherwise (tokenizer.ggml.add_bos_token, read later). */
        t->pretok = PRETOK_LLAMA3;
        t->ignore_merges = true;
        t->add_bos = true;
    } else if (strcmp(pre, "gpt-2") == 0 || strcmp(pre, "gpt2") == 0) {
        t->pretok = PRETOK_GPT2;
    } else {
        rc = moex_errorf("tokenizer: pre-tokenizer \"%s\" is not supported (qwen2, qwen35, llama-bpe, lfm2, gpt-2)", pre);
    }
    free(pre);
    return rc;
}

/* Copies the token texts and reads their types. */
static int load_tokens(struct tokenizer *t, const struct gguf_file *f) {
    const struct gguf_kv *tokens = find_string_array(f, KEY_TOKENS);
    if (!tokens) return -1;
    if (tokens->array_len < 256 || tokens->array_len > MAX_VOCAB)
        return moex_errorf("tokenizer: %s has %llu entries (256..%d expected)", KEY_TOKENS,
                           (unsigned long long)tokens->array_len, MAX_VOCAB);
    t->n_vocab = (int32_t)tokens->array_len;

    uint64_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const struct gguf_str *s = &tokens->array_strs[i];
        if (s->len > 0 && !s->data) return moex_errorf("tokenizer: token %d has no text", i);
        if (s->len > MAX_TOKEN_BYTES)
            return moex_errorf("tokenizer: token %d is %llu bytes long (at most %d)", i,
                               (unsigned long long)s->len, MAX_TOKEN_BYTES);
        total += s->len + 1;
        if (total > UINT32_MAX) return moex_errorf("tokenizer: token texts exceed 4 GiB");
    }
    t->text = malloc(total ? total : 1);
    t->piece = malloc(total ? total : 1);
    t->text_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->text_off);
    t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
    t->type = malloc((size_t)t->n_vocab);
    if (!t->text || !t->piece || !t->text_off || !t->piece_off || !t->type)
        return moex_errorf("tokenizer: out of memory");
    uint32_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const struct gguf_str *s = &tokens->array_strs[i];
        t->text_off[i] = off;
        if (s->len) memcpy(t->text + off, s->data, s->len);
        off += (uint32_t)s->len;
        t->text[off++] = 0;
    }
    t->text_off[t->n_vocab] = off;

    const struct gguf_kv *types = gguf_find_kv(f, KEY_TYPES);
    if (!types) {
        memset(t->type, TOKEN_NORMAL, (size_t)t->n_vocab);
        return 0;
    }
    if (types->type != GGUF_ARRAY || types->array_len != tokens->array_len || !types->array_data)
        return moex_errorf("tokenizer: %s must be an integer array of %d entries", KEY_TYPES, t->n_vocab);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int64_t v;
        if (array_int(types, (uint64_t)i, &v) != 0)
            return moex_errorf("tokenizer: %s is not an integer array", KEY_TYPES);
        if (v < TOKEN_UNDEFINED || v > TOKEN_BYTE)
            return moex_errorf("tokenizer: token %d has type %lld (0..6 expected)", i, (long long)v);
        t->type[i] = (uint8_t)v;
    }
    return 0;
}

static int build_text_index(struct tokenizer *t) {
    uint32_t size = table_size((uint64_t)t->n_vocab);
    t->text_index = malloc((size_t)size * sizeof *t->text_index);
    if (!t->text_index) return moex_errorf("tokenizer: out of memory");
    memset(t->text_index, 0xff, (size_t)size * sizeof *t->text_index);
    t->text_mask = size - 1;
    for (int32_t i = 0; i < t->n_vocab; i++) index_token(t, i);

    for (int b = 0; b < 256; b++) {
        char utf8[4];
        int n = utf8_encode(byte_to_unicode((uint8_t)b), utf8);
        t->byte_token[b] = tokenizer_find(t, utf8, (size_t)n);
        if (t->byte_token[b] < 0)
            return moex_errorf("tokenizer: the vocabulary has no token for byte 0x%02x", b);
    }
    return 0;
}

static int load_merges(struct tokenizer *t, const struct gguf_file *f) {
    const struct gguf_kv *merges = find_string_array(f, KEY_MERGES);
    if (!merges) return -1;
    if (merges->array_len > MAX_VOCAB)
        return moex_errorf("tokenizer: %s has %llu entries (at most %d)", KEY_MERGES,
                           (unsigned long long)merges->array_len, MAX_VOCAB);
    uint32_t size = table_size(merges->array_len);
    t->merges = malloc((size_t)size * sizeof *t->merges);
    if (!t->merges) return moex_errorf("tokenizer: out of memory");
    for (uint32_t i = 0; i < size; i++) t->merges[i].rank = -1;
    t->merge_mask = size - 1;

    char *joined = NULL;
    size_t joined_cap = 0;
    int rc = 0;
    for (uint64_t r = 0; r < merges->array_len && rc == 0; r++) {
        const struct gguf_str *m = &merges->array_strs[r];
        /* "a b": the space that separates is searched from the second byte,
         * as llama.cpp does. */
        const char *space = m->len > 1 && m->data ? memchr(m->data + 1, ' ', m->len - 1) : NULL;
        if (!space) {
            rc = moex_errorf("tokenizer: merge %llu is not \"a b\"", (unsigned long long)r);
            break;
        }
        size_t alen = (size_t)(space - m->data), blen = m->len - alen - 1;
        if (m->len > joined_cap) {
            free(joined);
            joined_cap = m->len;
            joined = malloc(joined_cap);
            if (!joined) { rc = moex_errorf("tokenizer: out of memory"); break; }
        }
        memcpy(joined, m->data, alen);
        memcpy(joined + alen, space + 1, blen);
        int32_t a = tokenizer_find(t, m->data, alen);
        int32_t b = tokenizer_find(t, space + 1, blen);
        int32_t result = tokenizer_find(t, joined, alen + blen);
        if (a < 0 || b < 0 || result < 0) {
            rc = moex_errorf("tokenizer: merge %llu \"%.*s\" names a token the vocabulary lacks",
                             (unsigned long long)r, (int)(m->len < 64 ? m->len : 64), m->data);
            break;
        }
        uint64_t pair = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint32_t i = (uint32_t)tok_mix64(pair) & t->merge_mask;
        while (t->merges[i].rank >= 0 && t->merges[i].pair != pair) i = (i + 1) & t->merge_mask;
        /* A repeated merge keeps its first (best) rank, as in llama.cpp. */
        if (t->merges[i].rank < 0) {
            t->merges[i].pair = pair;
            t->merges[i].rank = (int32_t)r;
            t->merges[i].result = result;
        }
    }
    free(joined);
    return rc;
}

/* The decoded bytes of every token (see tokenizer_decode_token). */
static void build_pieces(struct tokenizer *t) {
    int16_t byte_of[0x100 + 68];
    for (uint32_t cp = 0; cp < 0x100 + 68; cp++) byte_of[cp] = (int16_t)unicode_to_byte(cp);
    uint32_t off = 0;
    t->max_piece = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const uint8_t *s = (const uint8_t *)t->text + t->text_off[id];
        size_t n = tok_text_len(t, id);
        t->piece_off[id] = off;
        uint32_t start = off;
        switch (t->type[id]) {
        case TOKEN_NORMAL:
            for (size_t i = 0; i < n;) {
                uint32_t cp;
                int len = utf8_decode(s + i, n - i, &cp);
                if (cp < 0x100 + 68 && byte_of[cp] >= 0 && !(cp == 0xFFFD && len == 1)) {
                    t->piece[off++] = (char)byte_of[cp];
                } else {
                    /* Not of the byte alphabet: kept as written. */
                    memcpy(t->piece + off, s + i, (size_t)len);
                    off += (uint32_t)len;
                }
                i += (size_t)len;
            }
            break;
        case TOKEN_CONTROL:
        case TOKEN_UNKNOWN:
        case TOKEN_USER_DEFINED:
            memcpy(t->piece + off, s, n);
            off += (uint32_t)n;
            break;
        default:
            break;   /* unused, undefined, byte: nothing, as llama.cpp prints */
        }
        if (off - start > t->max_piece) t->max_piece = off - start;
    }
    t->piece_off[t->n_vocab] = off;
}

struct special_key {
    size_t len;
    int32_t id;
};

static int by_length_desc(const void *pa, const void *pb) {
    const struct special_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static bool is_special_type(uint8_t ty) {
    return ty == TOKEN_CONTROL || ty == TOKEN_UNKNOWN || ty == TOKEN_USER_DEFINED;
}

static int build_specials(struct tokenizer *t) {
    int n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t->type[id]) && tok_text_len(t, id) > 0) n++;
    struct special_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    t->specials = malloc((size_t)(n ? n : 1) * sizeof *t->specials);
    if (!keys || !t->specials) {
        free(keys);
        return moex_errorf("tokenizer: out of memory");
    }
    n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t->type[id]) && tok_text_len(t, id) > 0)
            keys[n++] = (struct special_key){tok_text_len(t, id), id};
    /* Longest first, so that a special token containing another wins: the
     * order llama.cpp splits them in. */
    qsort(keys, (size_t)n, sizeof *keys, by_length_desc);
    for (int i = 0; i < n; i++) t->specials[i] = keys[i].id;
    t->n_specials = n;
    free(keys);
    return 0;
}

/* An optional token id key: -1 if absent, an error if present but invalid. */
static int load_id(const struct tokenizer *t, const struct gguf_file *f, const char *key, int32_t *out) {
    *out = -1;
    if (!gguf_find_kv(f, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(f, key, &v) != 0) return moex_errorf("tokenizer: %s is not an unsigned integer", key);
    if (v >= (uint32_t)t->n_vocab)
        return moex_errorf("tokenizer: %s = %u is out of range (vocabulary of %d)", key, v, t->n_vocab);
    *out = (int32_t)v;
    return 0;
}

static const char *const end_markers[] = {
    "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<|end_of_text|>", "<EOT>",
};

static void add_eog(struct tokenizer *t, int32_t id) {
    if (id < 0 || t->n_eog == TOKENIZER_MAX_EOG) return;
    for (int i = 0; i < t->n_eog; i++) if (t->eog[i] == id) return;
    t->eog[t->n_eog++] = id;
}

static int load_special_ids(struct tokenizer *t, const struct gguf_file *f) {
    if (load_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos) ||
        load_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos) ||
        load_id(t, f, "tokenizer.ggml.padding_token_id", &t->pad) ||
        load_id(t, f, "tokenizer.ggml.eot_token_id", &t->eot))
        return -1;
    if (gguf_find_kv(f, "tokenizer.ggml.add_bos_token") &&
        gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos) != 0)
        return moex_errorf("tokenizer: tokenizer.ggml.add_bos_token is not a boolean");

    size_t n_markers = sizeof end_markers / sizeof end_markers[0];
    /* The first five are candidates for end of turn, in that order. */
    for (size_t i = 0; i < 5 && t->eot < 0; i++)
        t->eot = tokenizer_find(t, end_markers[i], strlen(end_markers[i]));
    if (t->eot < 0) t->eot = t->eos;
    add_eog(t, t->eos);
    add_eog(t, t->eot);
    for (size_t i = 0; i < n_markers; i++) add_eog(t, tokenizer_find(t, end_markers[i], strlen(end_markers[i])));
    return 0;
}

static int load_all(struct tokenizer *t, const struct gguf_file *f) {
    if (load_pretok(t, f) || load_tokens(t, f) || build_text_index(t) || load_merges(t, f) || build_specials(t) ||
        load_special_ids(t, f))
        return -1;
    build_pieces(t);
    if (gguf_find_kv(f, "tokenizer.chat_template")) {
        t->chat_template = gguf_get_str(f, "tokenizer.chat_template");
        if (!t->chat_template) return moex_errorf("tokenizer: tokenizer.chat_template is not a string");
    }
    return 0;
}

struct tokenizer *tokenizer_load(const struct gguf_file *f) {
    if (!f) { moex_errorf("tokenizer: no file"); return NULL; }
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t) { moex_errorf("%s: tokenizer: out of memory", f->path ? f->path : "GGUF"); return NULL; }
    if (load_all(t, f) != 0) {
        /* The message names the file (copied first: it is its own argument). */
        char why[768];
        snprintf(why, sizeof why, "%s", moex_error());
        moex_errorf("%s: %s", f->path ? f->path : "GGUF", why);
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

void tokenizer_free(struct tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->piece);
    free(t->piece_off);
    free(t->type);
    free(t->text_index);
    free(t->merges);
    free(t->specials);
    free(t->chat_template);
    free(t);
}

int tokenizer_n_vocab(const struct tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const struct tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const struct tokenizer *t) { return t->eos; }
int32_t tokenizer_eot(const struct tokenizer *t) { return t->eot; }
int32_t tokenizer_pad(const struct tokenizer *t) { return t->pad; }
bool tokenizer_add_bos(const struct tokenizer *t) { return t->add_bos; }
const char *tokenizer_chat_template(const struct tokenizer *t) { return t->chat_template; }

bool tokenizer_is_eog(const struct tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++) if (t->eog[i] == id) return true;
    return false;
}

const char *tokenizer_token_text(const struct tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        moex_errorf("tokenizer: token id %d is out of range (vocabulary of %d)", id, t->n_vocab);
        return NULL;
    }
    if (len) *len = tok_text_len(t, id);
    return t->text + t->text_off[id];
}

int tokenizer_token_type(const struct tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return -1;
    return t->type[id];
}

bool tokenizer_is_control(const struct tokenizer *t, int32_t id) {
    return tokenizer_token_type(t, id) == TOKEN_CONTROL;
}
