#include "synth/synth_vocab.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "text/vocab_builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define TYPE_NORMAL 1
#define TYPE_UNUSED 5

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static char *str_copy(const char *data, size_t len) {
    char *s = malloc(len + 1);
    if (s) { memcpy(s, data, len); s[len] = 0; }
    return s;
}

/* Appends [PAD<id>] tokens (unused) up to n. */
static int pad_to(struct synth_vocab *v, int n) {
    if (n <= v->n_tokens) return 0;
    char **tokens = realloc(v->tokens, (size_t)n * sizeof *tokens);
    if (tokens) v->tokens = tokens;
    int32_t *types = realloc(v->types, (size_t)n * sizeof *types);
    if (types) v->types = types;
    int32_t *old_id = realloc(v->old_id, (size_t)n * sizeof *old_id);
    if (old_id) v->old_id = old_id;
    if (!tokens || !types || !old_id) return -1;
    for (int i = v->n_tokens; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%d]", i);
        if (!(v->tokens[i] = strdup(buf))) return -1;
        v->types[i] = TYPE_UNUSED;
        v->old_id[i] = -1;
        v->n_tokens = i + 1;
    }
    return 0;
}

static int build_builtin(int n_vocab, struct synth_vocab *v) {
    if (n_vocab && n_vocab < 259)
        return moex_errorf("synth: a vocabulary of %d cannot hold the 256 byte tokens and 3 control tokens", n_vocab);
    struct builtin_vocab b;
    if (builtin_vocab_make(n_vocab ? n_vocab - 259 : BUILTIN_VOCAB_ALL, &b)) return -1;
    v->n_tokens = b.n_tokens;
    v->tokens = b.tokens;
    v->types = b.types;
    v->n_merges = b.n_merges;
    v->merges = b.merges;
    v->old_id = malloc((size_t)b.n_tokens * sizeof *v->old_id);
    if (!v->old_id) return moex_errorf("synth: out of memory");
    for (int i = 0; i < b.n_tokens; i++) v->old_id[i] = i;
    return 0;
}

/* String -> present? set over the kept tokens, for filtering merges. */
struct str_set {
    const char **slots;
    size_t mask;
};

static uint64_t hash_str(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

static int set_init(struct str_set *s, char **strs, int n) {
    size_t size = 16;
    while (size < 2 * (size_t)n) size *= 2;
    s->slots = calloc(size, sizeof *s->slots);
    s->mask = size - 1;
    if (!s->slots) return -1;
    for (int i = 0; i < n; i++) {
        size_t j = hash_str(strs[i], strlen(strs[i])) & s->mask;
        while (s->slots[j] && strcmp(s->slots[j], strs[i])) j = (j + 1) & s->mask;
        s->slots[j] = strs[i];
    }
    return 0;
}

static int set_has(const struct str_set *s, const char *str, size_t n) {
    size_t j = hash_str(str, n) & s->mask;
    for (; s->slots[j]; j = (j + 1) & s->mask)
        if (strlen(s->slots[j]) == n && !memcmp(s->slots[j], str, n)) return 1;
    return 0;
}

/* Keeps the merges whose two parts and joined result are all kept tokens. */
static int filter_merges(const struct gguf_kv *merges, struct synth_vocab *v) {
    struct str_set set;
    if (set_init(&set, v->tokens, v->n_tokens)) return -1;
    v->merges = malloc((merges->array_len ? merges->array_len : 1) * sizeof *v->merges);
    char *joined = NULL;
    size_t joined_cap = 0;
    int rc = v->merges ? 0 : -1;
    for (uint64_t i = 0; i < merges->array_len && rc == 0; i++) {
        const struct gguf_str *m = &merges->array_strs[i];
        const char *space = m->len > 1 ? memchr(m->data + 1, ' ', m->len - 1) : NULL;
        if (!space) continue;
        size_t la = (size_t)(space - m->data), lb = m->len - la - 1;
        if (la + lb > joined_cap) {
            char *g = realloc(joined, la + lb);
            if (!g) { rc = -1; break; }
            joined = g;
            joined_cap = la + lb;
        }
        memcpy(joined, m->data, la);
        memcpy(joined + la, space + 1, lb);
        if (!set_has(&set, m->data, la) || !set_has(&set, space + 1, lb) || !set_has(&set, joined, la + lb)) continue;
        if (!(v->merges[v->n_merges] = str_copy(m->data, m->len))) rc = -1;
        else v->n_merges++;
    }
    free(joined);
    free(set.slots);
    return rc;
}

/* The special tokens a cut vocabulary keeps: every id a *_token_id key
 * names, and ChatML's markers, which the chat template needs. */
static int mark_specials(const struct gguf_file *f, const struct gguf_kv *tokens, uint8_t *special) {
    int n = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        if (strncmp(kv->key, "tokenizer.ggml.", 15) || !ends_with(kv->key, "_token_id") || kv->type == GGUF_ARRAY ||
            kv->type == GGUF_STRING)
            continue;
        uint64_t id = kv->v.u64;
        if (id < tokens->array_len && !special[id]) { special[id] = 1; n++; }
    }
    for (uint64_t i = 0; i < tokens->array_len; i++) {
        const struct gguf_str *s = &tokens->array_strs[i];
        if (special[i]) continue;
        if ((s->len == 12 && !memcmp(s->data, "<|im_start|>", 12)) || (s->len == 10 && !memcmp(s->data, "<|im_end|>", 10))) {
            special[i] = 1;
            n++;
        }
    }
    return n;
}

static int build_from(const char *path, int n_vocab, struct synth_vocab *v) {
    v->src = gguf_open(path);
    if (!v->src) return -1;
    const struct gguf_kv *tokens = gguf_find_kv(v->src, KEY_TOKENS);
    if (!tokens || tokens->type != GGUF_ARRAY || tokens->array_type != GGUF_STRING || !tokens->array_len)
        return moex_errorf("%s: no tokenizer (%s missing)", path, KEY_TOKENS);
    if (tokens->array_len > (1u << 24)) return moex_errorf("%s: %s is too long", path, KEY_TOKENS);
    int total = (int)tokens->array_len;
    uint8_t *special = calloc((size_t)total, 1);
    v->new_id = malloc((size_t)total * sizeof *v->new_id);
    int keep = n_vocab && n_vocab < total ? n_vocab : total;
    v->tokens = calloc((size_t)keep, sizeof *v->tokens);
    v->types = malloc((size_t)keep * sizeof *v->types);
    v->old_id = malloc((size_t)keep * sizeof *v->old_id);
    if (!special || !v->new_id || !v->tokens || !v->types || !v->old_id) { free(special); return moex_errorf("synth: out of memory"); }
    int n_special = mark_specials(v->src, tokens, special);
    if (keep < total && keep <= n_special) {
        free(special);
        return moex_errorf("synth: --vocab %d leaves no room beside the %d special tokens of %s", keep, n_special, path);
    }
    const struct gguf_kv *types = gguf_find_kv(v->src, KEY_TYPES);
    if (types && (types->type != GGUF_ARRAY || types->array_len != (uint64_t)total ||
                  (types->array_type != GGUF_I32 && types->array_type != GGUF_U32)))
        types = NULL;
    int regular_left = keep - (keep < total ? n_special : 0);
    for (int i = 0; i < total; i++) {
        v->new_id[i] = -1;
        if (keep < total && !special[i]) {
            if (regular_left == 0) continue;
            regular_left--;
        }
        int id = v->n_tokens;
        const struct gguf_str *s = &tokens->array_strs[i];
        if (!(v->tokens[id] = str_copy(s->data, s->len))) { free(special); return moex_errorf("synth: out of memory"); }
        v->types[id] = types ? ((const int32_t *)types->array_data)[i] : TYPE_NORMAL;
        v->old_id[id] = i;
        v->new_id[i] = id;
        v->n_tokens++;
    }
    free(special);
    const struct gguf_kv *merges = gguf_find_kv(v->src, KEY_MERGES);
    if (merges && merges->type == GGUF_ARRAY && merges->array_type == GGUF_STRING && filter_merges(merges, v))
        return moex_errorf("synth: out of memory");
    return 0;
}

int synth_vocab_build(const char *vocab_from, int n_vocab, struct synth_vocab *v) {
    memset(v, 0, sizeof *v);
    int rc = vocab_from ? build_from(vocab_from, n_vocab, v) : build_builtin(n_vocab, v);
    if (rc == 0 && pad_to(v, n_vocab)) rc = moex_errorf("synth: out of memory");
    if (rc) synth_vocab_free(v);
    return rc;
}

static void set_builtin_keys(const struct synth_vocab *v, struct gguf_writer *w) {
    /* The built-in vocabulary ends its own entries with the three control
     * tokens; padding (if any) follows them. */
    int end = v->n_tokens;
    while (end > 0 && v->old_id[end - 1] < 0) end--;
    gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_set_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_set_arr_str(w, KEY_TOKENS, (const char *const *)v->tokens, (uint64_t)v->n_tokens);
    gguf_set_arr(w, KEY_TYPES, GGUF_I32, v->types, (uint64_t)v->n_tokens);
    gguf_set_arr_str(w, KEY_MERGES, (const char *const *)v->merges, (uint64_t)v->n_merges);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(end - 1));
    gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)(end - 3));
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(end - 3));
    gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    gguf_set_str(w, "tokenizer.chat_template", builtin_chat_template);
}

/* An array with one element per source token, cut and padded like the tokens. */
static void set_per_token_array(const struct synth_vocab *v, struct gguf_writer *w, const struct gguf_kv *kv) {
    size_t size = gguf_vtype_size(kv->array_type);
    uint8_t *data = calloc((size_t)v->n_tokens, size ? size : 1);
    if (!data || !size) { free(data); gguf_copy_kv(w, kv); return; }
    int is_types = !strcmp(kv->key, KEY_TYPES);
    for (int i = 0; i < v->n_tokens; i++) {
        if (v->old_id[i] >= 0) memcpy(data + (size_t)i * size, (const uint8_t *)kv->array_data + (size_t)v->old_id[i] * size, size);
        else if (is_types) { int32_t t = TYPE_UNUSED; memcpy(data + (size_t)i * size, &t, sizeof t < size ? sizeof t : size); }
    }
    gguf_set_arr(w, kv->key, kv->array_type, data, (uint64_t)v->n_tokens);
    free(data);
}

void synth_vocab_set_keys(const struct synth_vocab *v, struct gguf_writer *w) {
    if (!v->src) { set_builtin_keys(v, w); return; }
    const struct gguf_kv *tokens = gguf_find_kv(v->src, KEY_TOKENS);
    for (uint64_t i = 0; i < v->src->n_kv; i++) {
        const struct gguf_kv *kv = &v->src->kv[i];
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        if (!strcmp(kv->key, KEY_TOKENS)) {
            gguf_set_arr_str(w, kv->key, (const char *const *)v->tokens, (uint64_t)v->n_tokens);
        } else if (!strcmp(kv->key, KEY_MERGES) && kv->type == GGUF_ARRAY && kv->array_type == GGUF_STRING) {
            gguf_set_arr_str(w, kv->key, (const char *const *)v->merges, (uint64_t)v->n_merges);
        } else if (!strncmp(kv->key, "tokenizer.ggml.", 15) && ends_with(kv->key, "_token_id") &&
                   kv->type != GGUF_ARRAY && kv->type != GGUF_STRING) {
            if (kv->v.u64 < tokens->array_len && v->new_id[kv->v.u64] >= 0)
                gguf_set_u32(w, kv->key, (uint32_t)v->new_id[kv->v.u64]);
        } else if (kv->type == GGUF_ARRAY && kv->array_type != GGUF_STRING && kv->array_len == tokens->array_len) {
            set_per_token_array(v, w, kv);
        } else {
            gguf_copy_kv(w, kv);
        }
    }
}

void synth_vocab_free(struct synth_vocab *v) {
    for (int i = 0; i < v->n_tokens; i++) if (v->tokens) free(v->tokens[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    free(v->new_id);
    free(v->old_id);
    gguf_close(v->src);
    memset(v, 0, sizeof *v);
}
