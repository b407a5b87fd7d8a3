/* The tokenizer against the reference ids of HuggingFace and llama.cpp
 * (oracle/tokenizer), round trips, the streaming decoder, the 2048-token
 * vocabulary of the oracle models, and damaged vocabularies. */
#include "harness.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "text/chat.h"
#include "text/pretok.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"   /* which split a pre-tokenizer name selects */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEPARATOR "\n__ggml_vocab_test__\n"

struct cases {
    char *inp, *out;           /* the files, NUL-terminated, cut in place */
    int n;
    const char *text[128];
    size_t text_len[128];
    const char *ids[128];      /* one line of space-separated ids each */
};

static char *read_text(const char *path) {
    size_t n;
    char *data = read_whole_file(path, &n);
    if (!data) return NULL;
    char *s = realloc(data, n + 1);
    if (!s) { free(data); return NULL; }
    s[n] = 0;
    return s;
}

/* Texts are separated by "\n__ggml_vocab_test__\n" (the newline before the
 * marker is not part of the text); a last text may end without a marker. The
 * .out file has one line per text. */
static int load_cases(struct cases *c, const char *name) {
    char path[256];
    memset(c, 0, sizeof *c);
    snprintf(path, sizeof path, "tokenizer/%s.inp", name);
    c->inp = read_text(oracle_path(path));
    snprintf(path, sizeof path, "tokenizer/%s.out", name);
    c->out = read_text(oracle_path(path));
    if (!c->inp || !c->out) return -1;
    char *p = c->inp;
    for (;;) {
        char *sep = strstr(p, SEPARATOR);
        if (!sep && *p == 0) break;
        if (c->n == 128) return -1;
        c->text[c->n] = p;
        c->text_len[c->n] = sep ? (size_t)(sep - p) : strlen(p);
        c->n++;
        if (!sep) break;
        *sep = 0;
        p = sep + strlen(SEPARATOR);
    }
    p = c->out;
    for (int i = 0; i < c->n; i++) {
        char *nl = strchr(p, '\n');
        if (!nl && *p == 0) return -1;
        c->ids[i] = p;
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    return 0;
}

static void free_cases(struct cases *c) {
    free(c->inp);
    free(c->out);
}

static int parse_ids(const char *line, int32_t *ids, int max) {
    int n = 0;
    char *end;
    for (;;) {
        long v = strtol(line, &end, 10);
        if (end == line) break;
        if (n == max) return -1;
        ids[n++] = (int32_t)v;
        line = end;
    }
    return n;
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "  %s:", label);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

/* Streams ids one by one; every piece that comes out must be valid UTF-8 on
 * its own; returns the concatenation (malloc'd). */
static char *stream_decode(const struct tokenizer *t, const int32_t *ids, int n, size_t *len, int *bad_piece) {
    size_t bound = tokenizer_stream_bound(t);
    char *piece = malloc(bound);
    char *all = malloc(bound * (size_t)(n + 1) + 1);
    struct tokenizer_stream s;
    tokenizer_stream_init(&s);
    size_t w = 0;
    *bad_piece = 0;
    for (int i = 0; i <= n; i++) {
        int k = i < n ? tokenizer_stream_put(t, &s, ids[i], piece, bound)
                      : tokenizer_stream_flush(&s, piece, bound);
        if (k < 0) { *bad_piece = 1; break; }
        struct utf8_stream check = {0};
        char repaired[64 * 1024];
        if ((size_t)k * 3 + 12 <= sizeof repaired) {
            size_t r = utf8_stream_put(&check, (const uint8_t *)piece, (size_t)k, repaired);
            if (r != (size_t)k || check.n_pending || memcmp(repaired, piece, r) != 0) *bad_piece = 1;
        }
        memcpy(all + w, piece, (size_t)k);
        w += (size_t)k;
    }
    all[w] = 0;
    free(piece);
    *len = w;
    return all;
}

static void run_cases(const struct tokenizer *t, const char *name, bool parse_special) {
    struct cases c;
    if (load_cases(&c, name) != 0) {
        CHECKF(0, "cannot read the %s cases", name);
        free_cases(&c);
        return;
    }
    CHECKF(c.n > 0, "%s: no cases", name);
    int agree = 0;
    static int32_t want[65536], got[65536];
    for (int i = 0; i < c.n; i++) {
        int n_want = c.ids[i] ? parse_ids(c.ids[i], want, 65536) : -1;
        int n_got = tokenizer_encode(t, c.text[i], c.text_len[i], parse_special, got, 65536);
        CHECKF(n_want >= 0 && n_got >= 0, "%s case %d: %s", name, i, moex_error());
        if (n_want < 0 || n_got < 0) continue;
        bool same = n_want == n_got && memcmp(want, got, (size_t)n_got * sizeof *got) == 0;
        agree += same;
        CHECKF(same, "%s case %d: \"%.60s\" gives other ids", name, i, c.text[i]);
        if (!same) { print_ids("want", want, n_want); print_ids("got ", got, n_got); }

        size_t len;
        char *back = tokenizer_decode_alloc(t, got, n_got, &len);
        CHECKF(back && len == c.text_len[i] && memcmp(back, c.text[i], len) == 0,
               "%s case %d: decode(encode(text)) != text", name, i);
        free(back);

        int bad;
        char *streamed = stream_decode(t, got, n_got, &len, &bad);
        CHECKF(!bad && len == c.text_len[i] && memcmp(streamed, c.text[i], len) == 0,
               "%s case %d: streamed decode differs", name, i);
        free(streamed);
    }
    printf("%s: %d of %d cases give the reference ids\n", name, agree, c.n);
    free_cases(&c);
}

static int32_t byte_token(const struct tokenizer *t, uint8_t b) {
    char utf8[4];
    int n = utf8_encode(byte_to_unicode(b), utf8);
    return tokenizer_find(t, utf8, (size_t)n);
}

static void test_stream_bytes(const struct tokenizer *t) {
    /* Multi-byte text sent one byte token at a time. */
    const char *text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99!";
    size_t n = strlen(text);
    int32_t ids[64];
    for (size_t i = 0; i < n; i++) ids[i] = byte_token(t, (uint8_t)text[i]);
    size_t len;
    int bad;
    char *s = stream_decode(t, ids, (int)n, &len, &bad);
    CHECK(!bad && len == n && memcmp(s, text, n) == 0);
    free(s);

    /* Ill-formed: a stray continuation byte, a lead byte cut short by ASCII,
     * and a tail that never completes. Each becomes U+FFFD. */
    const uint8_t broken[] = {'a', 0x80, 'b', 0xE4, 0xB8, 'c', 0xF0, 0x9F};
    const char *want = "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD";
    for (size_t i = 0; i < sizeof broken; i++) ids[i] = byte_token(t, broken[i]);
    s = stream_decode(t, ids, (int)sizeof broken, &len, &bad);
    CHECKF(!bad && len == strlen(want) && memcmp(s, want, len) == 0, "got \"%s\"", s);
    free(s);

    /* A pending partial sequence gives nothing until it completes. */
    struct tokenizer_stream st;
    tokenizer_stream_init(&st);
    char out[4096];
    CHECK(tokenizer_stream_put(t, &st, byte_token(t, 0xE4), out, sizeof out) == 0);
    CHECK(tokenizer_stream_put(t, &st, byte_token(t, 0xB8), out, sizeof out) == 0);
    CHECK(tokenizer_stream_put(t, &st, byte_token(t, 0x96), out, sizeof out) == 3);
    CHECK(tokenizer_stream_put(t, &st, -1, out, sizeof out) == -1);
    CHECK(tokenizer_stream_put(t, &st, 0, out, 2) == -1);
}


/* Random mixtures of words, scripts, whitespace, special tokens and stray
 * bytes: every id is in range and decoding gives the input back. */
static void test_random_round_trips(const struct tokenizer *t) {
    static const char *const parts[] = {
        "hello", " World", "'s", "'LL", "123", "3.14", " ", "  ", "\n", "\r\n", "\t", "\xC2\xA0",
        "\xE4\xB8\xAD\xE6\x96\x87", "\xD0\x9F\xD1\x80\xD0\xB8", "\xF0\x9F\xA6\x99", "\xE2\x80\x8B",
        "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|", "|>", "!!", "...", "```",
        "\x80", "\xFF", "\xC3", "\xE4\xB8", "\xF0\x9F", "\xED\xA0\x80", "\xC0\xAF", "\x00", "aaaaaaaa",
    };
    const int n_parts = (int)(sizeof parts / sizeof parts[0]);
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    char text[1024];
    int32_t ids[1024];
    int failures = 0;
    for (int round = 0; round < 3000 && failures < 5; round++) {
        size_t len = 0;
        int n_pick = (int)(state % 24);
        for (int k = 0; k < n_pick; k++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            int pick = (int)((state >> 33) % (uint64_t)n_parts);
            size_t pl = parts[pick][0] ? strlen(parts[pick]) : 1;   /* "\x00": one NUL byte */
            memcpy(text + len, parts[pick], pl);
            len += pl;
        }
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        bool parse_special = (state >> 40) & 1;
        int n = tokenizer_encode(t, text, len, parse_special, ids, 1024);
        bool ok = n >= 0;
        for (int i = 0; ok && i < n; i++) ok = ids[i] >= 0 && ids[i] < tokenizer_n_vocab(t);
        size_t back_len = 0;
        char *back = ok ? tokenizer_decode_alloc(t, ids, n, &back_len) : NULL;
        ok = ok && back && back_len == len && memcmp(back, text, len) == 0;
        free(back);
        if (!ok) failures++;
        CHECKF(ok, "random round trip %d fails", round);
    }
}

static void test_qwen3_vocab(void) {
    struct gguf_file *f = gguf_open(oracle_path("tokenizer/qwen3-vocab.gguf"));
    CHECKF(f != NULL, "%s", moex_error());
    if (!f) return;
    struct tokenizer *t = tokenizer_load(f);
    CHECKF(t != NULL, "%s", moex_error());
    gguf_close(f);   /* the tokenizer keeps its own copies */
    if (!t) return;

    CHECK(tokenizer_n_vocab(t) == 151936);
    CHECK(tokenizer_bos(t) == 151643);
    CHECK(tokenizer_eos(t) == 151645);
    CHECK(tokenizer_eot(t) == 151645);
    CHECK(tokenizer_pad(t) == 151643);
    CHECK(!tokenizer_add_bos(t));
    CHECK(tokenizer_is_eog(t, 151645) && tokenizer_is_eog(t, 151643) && !tokenizer_is_eog(t, 151644));
    CHECK(tokenizer_is_control(t, 151644) && !tokenizer_is_control(t, 151667) && !tokenizer_is_control(t, 9707));
    CHECK(tokenizer_token_type(t, 151667) == TOKEN_USER_DEFINED);
    CHECK(tokenizer_token_type(t, -1) == -1 && tokenizer_token_type(t, 151936) == -1);
    size_t len;
    const char *text = tokenizer_token_text(t, 151644, &len);
    CHECK(text && len == 12 && strcmp(text, "<|im_start|>") == 0);
    CHECK(tokenizer_token_text(t, 151936, &len) == NULL);
    CHECK(tokenizer_find(t, "<|im_end|>", 10) == 151645);
    CHECK(tokenizer_find(t, "Hello", 5) == 9707);
    CHECK(tokenizer_find(t, "no such token here", 18) == -1);
    const char *piece = tokenizer_decode_token(t, 21927, &len);   /* "ĠHello" */
    CHECK(piece && len == 6 && memcmp(piece, " Hello", 6) == 0);
    piece = tokenizer_decode_token(t, 151645, &len);
    CHECK(piece && len == 10 && memcmp(piece, "<|im_end|>", 10) == 0);
    CHECK(tokenizer_decode_token(t, 151936, &len) == NULL);
    const char *tmpl = tokenizer_chat_template(t);
    CHECK(tmpl && strstr(tmpl, "<|im_start|>") != NULL);

    run_cases(t, "hf-cases", false);
    run_cases(t, "extra", false);
    run_cases(t, "special", true);

    /* Control tokens are text unless parse_special; user-defined ones
     * (<think>) are always tokens. */
    int32_t ids[64];
    int n = tokenizer_encode(t, "<|im_start|><think>", 19, false, ids, 64);
    CHECK(n > 2 && ids[0] != 151644 && ids[n - 1] == 151667);
    n = tokenizer_encode(t, "<|im_start|><think>", 19, true, ids, 64);
    CHECK(n == 2 && ids[0] == 151644 && ids[1] == 151667);
    /* Too small an output buffer is an error, not an overflow. */
    CHECK(tokenizer_encode(t, "Hello world", 11, false, ids, 1) == -1);
    CHECK(strstr(moex_error(), "needs 2") != NULL);
    CHECK(tokenizer_encode(t, "", 0, false, ids, 0) == 0);

    /* Invalid UTF-8 goes through byte tokens and comes back unchanged. */
    const char bad[] = "\xFF\xFE" "abc\xC3 \xE4\xB8 x\xF8\x80\x80\x80\x80 \xED\xA0\x80";
    int32_t *bad_ids = tokenizer_encode_alloc(t, bad, sizeof bad - 1, true, &n);
    CHECK(bad_ids != NULL && n > 0);
    char *back = tokenizer_decode_alloc(t, bad_ids, n, &len);
    CHECK(back && len == sizeof bad - 1 && memcmp(back, bad, len) == 0);
    free(back);
    free(bad_ids);

    test_stream_bytes(t);
    test_random_round_trips(t);

    /* 1 MB of mixed text and a 1 MB single word: round trips (the time is
     * printed, not asserted). */
    const char *unit = "The quick brown fox, 12345 \xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9\n\t  <|im_end|> \xF0\x9F\xA6\x99!! ";
    size_t unit_len = strlen(unit), big_len = 1 << 20;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++) big[i] = unit[i % unit_len];
    big_len -= big_len % unit_len;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) memset(big, 'A', big_len);
        clock_t t0 = clock();
        int32_t *big_ids = tokenizer_encode_alloc(t, big, big_len, true, &n);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECK(big_ids != NULL);
        back = big_ids ? tokenizer_decode_alloc(t, big_ids, n, &len) : NULL;
        CHECK(back && len == big_len && memcmp(back, big, len) == 0);
        printf("%s: %zu bytes -> %d tokens in %.3f s\n", pass ? "one long word" : "mixed text", big_len, n, secs);
        free(back);
        free(big_ids);
    }
    free(big);
    tokenizer_free(t);
}

/* The oracle models keep the first 2045 Qwen3 tokens with the merges among
 * them, then <|endoftext|>, <|im_start|>, <|im_end|>. */
static void test_small_vocab(void) {
    struct gguf_file *big_f = gguf_open(oracle_path("tokenizer/qwen3-vocab.gguf"));
    struct gguf_file *small_f = gguf_open(oracle_path("models/qwen3moe-o1-Q4_0.gguf"));
    CHECKF(big_f && small_f, "%s", moex_error());
    struct tokenizer *big = big_f ? tokenizer_load(big_f) : NULL;
    struct tokenizer *small = small_f ? tokenizer_load(small_f) : NULL;
    CHECKF(big && small, "%s", moex_error());
    gguf_close(big_f);
    gguf_close(small_f);
    if (!big || !small) { tokenizer_free(big); tokenizer_free(small); return; }

    CHECK(tokenizer_n_vocab(small) == 2048);
    CHECK(tokenizer_bos(small) == 2045 && tokenizer_eos(small) == 2047 && tokenizer_eot(small) == 2047);
    CHECK(tokenizer_is_control(small, 2046));

    struct cases c;
    if (load_cases(&c, "extra") != 0) { CHECK(0); free_cases(&c); tokenizer_free(big); tokenizer_free(small); return; }
    int same_as_big = 0, only_small_tokens = 0;
    for (int i = 0; i < c.n; i++) {
        int nb, ns;
        int32_t *ib = tokenizer_encode_alloc(big, c.text[i], c.text_len[i], false, &nb);
        int32_t *is = tokenizer_encode_alloc(small, c.text[i], c.text_len[i], false, &ns);
        CHECK(ib && is);
        if (!ib || !is) { free(ib); free(is); continue; }
        int in_range = 1, big_in_small = 1;
        for (int k = 0; k < ns; k++) in_range &= is[k] >= 0 && is[k] < 2045;
        for (int k = 0; k < nb; k++) big_in_small &= ib[k] < 2045;
        CHECKF(in_range, "small vocab, case %d: id out of the 2045 ordinary tokens", i);
        CHECKF(ns >= nb, "small vocab, case %d: fewer tokens than the full vocabulary", i);
        /* Same texts, same ranks: where the full vocabulary only needs the
         * first 2045 tokens, the small one must find the same ids. */
        if (big_in_small) {
            only_small_tokens++;
            bool same = nb == ns && memcmp(ib, is, (size_t)nb * sizeof *ib) == 0;
            same_as_big += same;
            CHECKF(same, "small vocab, case %d: differs from the full vocabulary", i);
        }
        size_t len;
        char *back = tokenizer_decode_alloc(small, is, ns, &len);
        CHECKF(back && len == c.text_len[i] && memcmp(back, c.text[i], len) == 0,
               "small vocab, case %d: no round trip", i);
        free(back);
        free(ib);
        free(is);
    }
    printf("small vocabulary: %d of %d cases need only its tokens and match\n", same_as_big, only_small_tokens);
    CHECK(only_small_tokens >= 3);
    free_cases(&c);

    /* "<|im_start|>user\nHello!<|im_end|>\n" */
    int32_t ids[32];
    const char *chat = "<|im_start|>user\nHello!<|im_end|>\n";
    int n = tokenizer_encode(small, chat, strlen(chat), true, ids, 32);
    CHECK(n >= 5 && ids[0] == 2046 && ids[n - 2] == 2047 && ids[n - 1] == 198);
    tokenizer_free(big);
    tokenizer_free(small);
}

/* --- damaged vocabularies, written with the GGUF writer --------------------- */

#define N_BYTES 256

struct vocab_spec {
    const char *model, *pre;
    int n_tokens;               /* tokens written: bytes first, then extra */
    const char *extra[8];
    int32_t types_extra[8];
    int n_types;                /* -1: no token_type key */
    int type_array;             /* GGUF vtype of token_type */
    const char *merges[8];
    int n_merges;
    int64_t bos;                /* -1: none */
    int drop_byte;              /* index of a byte token to leave out, or -1 */
    int tokens_as_ints;
};

static char byte_texts[N_BYTES][4];

static struct vocab_spec good_spec(void) {
    struct vocab_spec s = {0};
    s.model = "gpt2";
    s.pre = "qwen2";
    s.extra[0] = "ab";
    s.extra[1] = "abc";
    s.extra[2] = "<|end|>";
    s.types_extra[0] = TOKEN_NORMAL;
    s.types_extra[1] = TOKEN_NORMAL;
    s.types_extra[2] = TOKEN_CONTROL;
    s.n_tokens = N_BYTES + 3;
    s.n_types = s.n_tokens;
    s.type_array = GGUF_I32;
    s.merges[0] = "a b";
    s.merges[1] = "ab c";
    s.n_merges = 2;
    s.bos = N_BYTES + 2;
    s.drop_byte = -1;
    return s;
}

/* Writes the vocabulary, opens it and loads a tokenizer from it. */
static struct tokenizer *load_spec(const struct vocab_spec *s, const char *name) {
    const char *tokens[N_BYTES + 8];
    int32_t types[N_BYTES + 8];
    int n = 0;
    for (int b = 0; b < N_BYTES; b++) {
        if (b == s->drop_byte) continue;
        tokens[n] = byte_texts[b];
        types[n++] = TOKEN_NORMAL;
    }
    for (int i = 0; n < s->n_tokens - (s->drop_byte >= 0); i++) {
        tokens[n] = s->extra[i];
        types[n++] = s->types_extra[i];
    }
    struct gguf_writer *w = gguf_writer_new();
    if (s->model) gguf_set_str(w, "tokenizer.ggml.model", s->model);
    if (s->pre) gguf_set_str(w, "tokenizer.ggml.pre", s->pre);
    if (s->tokens_as_ints) gguf_set_arr(w, "tokenizer.ggml.tokens", GGUF_I32, types, (uint64_t)n);
    else gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    if (s->n_types >= 0) {
        if (s->type_array == GGUF_STRING) gguf_set_arr_str(w, "tokenizer.ggml.token_type", tokens, (uint64_t)s->n_types);
        else gguf_set_arr(w, "tokenizer.ggml.token_type", (enum gguf_vtype)s->type_array, types, (uint64_t)s->n_types);
    }
    gguf_set_arr_str(w, "tokenizer.ggml.merges", s->merges, (uint64_t)s->n_merges);
    if (s->bos >= 0) gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
    int rc = gguf_writer_begin(w, path);
    if (rc == 0) rc = gguf_writer_finish(w);
    gguf_writer_free(w);
    CHECKF(rc == 0, "%s: %s", name, moex_error());
    if (rc != 0) return NULL;
    struct gguf_file *f = gguf_open(path);
    CHECKF(f != NULL, "%s: %s", name, moex_error());
    if (!f) return NULL;
    moex_clear_error();
    struct tokenizer *t = tokenizer_load(f);
    gguf_close(f);
    return t;
}

static void expect_error(const struct vocab_spec *s, const char *name, const char *needle) {
    struct tokenizer *t = load_spec(s, name);
    CHECKF(t == NULL, "%s: loaded", name);
    CHECKF(strstr(moex_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", name, moex_error(), needle);
    /* Errors name the file they come from. */
    char file[256];
    snprintf(file, sizeof file, "/%s.gguf: tokenizer: ", name);
    CHECKF(strstr(moex_error(), file) != NULL, "%s: message \"%s\" does not name the file", name, moex_error());
    tokenizer_free(t);
}

static void test_hostile_vocab(void) {
    for (int b = 0; b < N_BYTES; b++) {
        int n = utf8_encode(byte_to_unicode((uint8_t)b), byte_texts[b]);
        byte_texts[b][n] = 0;
    }
    struct vocab_spec s = good_spec();
    struct tokenizer *t = load_spec(&s, "good");
    CHECKF(t != NULL, "%s", moex_error());
    if (t) {
        int32_t ids[16];
        int n = tokenizer_encode(t, "abcab<|end|>a", 13, true, ids, 16);
        CHECK(n == 4 && ids[0] == N_BYTES + 1 && ids[1] == N_BYTES && ids[2] == N_BYTES + 2 && ids[3] == 'a');
        CHECK(tokenizer_bos(t) == N_BYTES + 2 && tokenizer_eos(t) == -1);
        tokenizer_free(t);
    }

    s = good_spec(); s.model = "llama";
    expect_error(&s, "model", "not supported");
    s = good_spec(); s.model = NULL;
    expect_error(&s, "no-model", "tokenizer.ggml.model");
    s = good_spec(); s.pre = "qwen35";
    t = load_spec(&s, "qwen35");
    CHECKF(t != NULL, "%s", moex_error());
    tokenizer_free(t);
    s = good_spec(); s.pre = "default";
    expect_error(&s, "pre", "pre-tokenizer \"default\" is not supported");
    /* LFM2's name: the Llama 3 split (digits in threes), BOS added by default. */
    s = good_spec(); s.pre = "lfm2";
    t = load_spec(&s, "pre-lfm2");
    CHECKF(t != NULL, "%s", moex_error());
    if (t) {
        CHECK(tokenizer_add_bos(t));
        CHECK(t->pretok == PRETOK_LLAMA3 && t->ignore_merges);
        tokenizer_free(t);
    }
    s = good_spec();
    t = load_spec(&s, "pre-qwen2");
    CHECK(t && !tokenizer_add_bos(t) && t->pretok == PRETOK_QWEN2);
    tokenizer_free(t);
    s = good_spec(); s.tokens_as_ints = 1;
    expect_error(&s, "tokens-ints", "not an array of strings");
    s = good_spec(); s.n_types = s.n_tokens - 1;
    expect_error(&s, "types-short", "token_type");
    s = good_spec(); s.type_array = GGUF_STRING;
    expect_error(&s, "types-strings", "token_type");
    s = good_spec(); s.types_extra[1] = 9;
    expect_error(&s, "type-value", "type 9");
    s = good_spec(); s.merges[1] = "ab d";   /* "abd" is no token */
    expect_error(&s, "merge-result", "merge 1");
    s = good_spec(); s.merges[0] = "abc";
    expect_error(&s, "merge-space", "merge 0");
    s = good_spec(); s.merges[0] = "x\xC4\xA0 y";   /* "xĠ" is no token */
    expect_error(&s, "merge-part", "merge 0");
    s = good_spec(); s.bos = s.n_tokens;
    expect_error(&s, "bos-range", "out of range");
    s = good_spec(); s.drop_byte = 0x41; s.n_types = s.n_tokens - 1; s.bos = -1;
    expect_error(&s, "no-byte", "byte 0x41");

    /* Without token types every token is normal. */
    s = good_spec(); s.n_types = -1;
    t = load_spec(&s, "no-types");
    CHECKF(t != NULL, "%s", moex_error());
    if (t) CHECK(tokenizer_token_type(t, N_BYTES + 2) == TOKEN_NORMAL);
    tokenizer_free(t);

    CHECK(tokenizer_load(NULL) == NULL);
}


/* --- chat template ----------------------------------------------------------- */

/* Expected texts: Qwen3's tokenizer.chat_template (from qwen3-vocab.gguf)
 * rendered by Jinja2 3.1 as HuggingFace does, with add_generation_prompt. */
struct render_case {
    struct chat_message m[6];
    int n;
    bool thinking;
    const char *want;
};

static const struct render_case render_cases[] = {
    {{{"user", "Hello!"}}, 1, true,
     "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"},
    {{{"system", "You are helpful."}, {"user", "2+2?"}}, 2, false,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {{{"system", "Be brief."}, {"user", "Hi"},
      {"assistant", "<think>\nThe user greets.\n</think>\n\nHello! How can I help?"}, {"user", "Bye"}}, 4, true,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
     "Hello! How can I help?<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
    {{{"user", "Hi"}, {"assistant", "<think>\n\n</think>\n\nHello!"}, {"user", "Bye"}}, 3, false,
     "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {{{"user", "a"}, {"assistant", "no think here\n"}, {"user", "b"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nno think here\n<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {{{"user", "a"}, {"assistant", "x</think>y</think>\n\nz"}, {"user", "b"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nz<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {{{"user", "a"}, {"assistant", "ok"}, {"system", "new rule"}, {"user", "b"}}, 4, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n<|im_start|>system\nnew rule<|im_end|>\n"
     "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"user", "<tool_response>\nres\n</tool_response>"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n"
     "<tool_response>\nres\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"tool", "t1"}, {"tool", "t2"}, {"assistant", "done"}}, 5, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n"
     "<tool_response>\nt1\n</tool_response>\n<tool_response>\nt2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
     "<think>\n\n</think>\n\ndone<|im_end|>\n<|im_start|>assistant\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"tool", "t1"},
      {"assistant", "\n\n<think>\n\nr2\n\n</think>\n\n\nfin\n"}}, 4, false,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n"
     "<tool_response>\nt1\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\nfin\n<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
};

static void test_chat(void) {
    struct gguf_file *f = gguf_open(oracle_path("tokenizer/qwen3-vocab.gguf"));
    struct tokenizer *t = f ? tokenizer_load(f) : NULL;
    gguf_close(f);
    CHECKF(t != NULL, "%s", moex_error());
    if (!t) return;
    enum chat_format fmt = chat_format_detect(tokenizer_chat_template(t));
    CHECK(fmt == CHAT_FORMAT_QWEN3);
    CHECK(strcmp(chat_format_name(fmt), "qwen3") == 0);
    CHECK(chat_format_detect(NULL) == CHAT_FORMAT_UNKNOWN);
    CHECK(chat_format_detect("{{ bos_token }}[INST] {{ m }} [/INST]") == CHAT_FORMAT_UNKNOWN);
    CHECK(chat_format_detect("{{'<|im_start|>' + message['role'] + '\\n'}}") == CHAT_FORMAT_CHATML);

    for (size_t i = 0; i < sizeof render_cases / sizeof render_cases[0]; i++) {
        const struct render_case *rc = &render_cases[i];
        size_t len;
        char *s = chat_render(fmt, rc->m, rc->n, true, rc->thinking, &len);
        CHECKF(s && len == strlen(rc->want) && strcmp(s, rc->want) == 0, "render case %zu: got \"%s\"", i, s ? s : moex_error());
        free(s);
    }
    CHECK(chat_render(fmt, NULL, 0, true, true, NULL) == NULL);
    struct chat_message odd = {"narrator", "x"};
    CHECK(chat_render(fmt, &odd, 1, true, true, NULL) == NULL && strstr(moex_error(), "narrator"));
    CHECK(chat_render(CHAT_FORMAT_UNKNOWN, render_cases[0].m, 1, true, true, NULL) == NULL);
    struct chat_message plain[2] = {{"user", "u"}, {"assistant", "<think>a</think>b"}};
    char *s = chat_render(CHAT_FORMAT_CHATML, plain, 2, true, false, NULL);
    CHECK(s && strcmp(s, "<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n<think>a</think>b<|im_end|>\n"
                         "<|im_start|>assistant\n") == 0);
    free(s);

    /* The growing text equals the rendering of the messages so far. */
    struct chat_text c = {0};
    CHECK(chat_append_reply(&c, fmt, "too early") == -1);
    CHECK(chat_append_user(&c, fmt, "Be brief.", "Hi", true) == 0);
    CHECK(strcmp(c.data, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0);
    CHECK(chat_append_reply(&c, fmt, "<think>\nThe user greets.\n</think>\n\nHello! How can I help?") == 0);
    CHECK(chat_append_reply(&c, fmt, "twice") == -1);
    CHECK(chat_append_user(&c, fmt, NULL, "Bye", true) == 0);
    CHECK(strcmp(c.data, render_cases[2].want) == 0);
    chat_text_free(&c);

    CHECK(chat_append_user(&c, fmt, NULL, "Hi", false) == 0);
    CHECK(chat_append_reply(&c, fmt, "Hello!") == 0);
    CHECK(chat_append_user(&c, fmt, NULL, "Bye", false) == 0);
    CHECK(strcmp(c.data, render_cases[3].want) == 0);
    chat_text_free(&c);

    /* The chat texts of oracle/tokenizer/special.inp. */
    struct cases sc;
    if (load_cases(&sc, "special") == 0 && sc.n >= 2) {
        CHECK(chat_append_user(&c, fmt, NULL, "Hello!", true) == 0);
        CHECK(c.len == sc.text_len[0] && memcmp(c.data, sc.text[0], c.len) == 0);
        chat_text_free(&c);
        CHECK(chat_append_user(&c, fmt, "You are helpful.", "2+2?", false) == 0);
        CHECK(c.len + 11 == sc.text_len[1] && memcmp(c.data, sc.text[1], c.len) == 0 &&
              memcmp(sc.text[1] + c.len, "4<|im_end|>", 11) == 0);
        /* Encoded with special tokens parsed, it gives the reference ids. */
        int32_t want[256], got[256];
        int n_want = parse_ids(sc.ids[1], want, 256);
        int n_got = tokenizer_encode(t, c.data, c.len, true, got, 256);
        CHECK(n_got > 0 && n_got + 2 == n_want && memcmp(got, want, (size_t)n_got * sizeof *got) == 0);
        chat_text_free(&c);
    } else {
        CHECKF(0, "cannot read the special cases");
    }
    free_cases(&sc);

    CHECK(chat_append_user(&c, CHAT_FORMAT_CHATML, "s", "u", false) == 0);
    CHECK(chat_append_reply(&c, CHAT_FORMAT_CHATML, "<think>kept</think>r") == 0);
    CHECK(strcmp(c.data, "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n"
                         "<think>kept</think>r<|im_end|>\n") == 0);
    chat_text_free(&c);
    CHECK(chat_append_user(&c, CHAT_FORMAT_UNKNOWN, NULL, "u", true) == -1);

    /* LFM2: bos_token once, then ChatML; detected by its tool-list markers. */
    CHECK(chat_format_detect("{{- bos_token -}}{{'<|im_start|>' + m}}List of tools: <|tool_list_start|>[") ==
          CHAT_FORMAT_LFM2);
    CHECK(strcmp(chat_format_name(CHAT_FORMAT_LFM2), "lfm2") == 0);
    const char *lfm2_want = "<|startoftext|><|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
                            "<|im_start|>assistant\nr<|im_end|>\n<|im_start|>user\nv<|im_end|>\n<|im_start|>assistant\n";
    struct chat_message lfm2_msgs[4] = {{"system", "s"}, {"user", "u"}, {"assistant", "r"}, {"user", "v"}};
    s = chat_render(CHAT_FORMAT_LFM2, lfm2_msgs, 4, true, true, NULL);
    CHECKF(s && strcmp(s, lfm2_want) == 0, "lfm2 render: \"%s\"", s ? s : moex_error());
    free(s);
    CHECK(chat_append_user(&c, CHAT_FORMAT_LFM2, "s", "u", true) == 0);
    CHECK(chat_append_reply(&c, CHAT_FORMAT_LFM2, "r") == 0);
    CHECK(chat_append_user(&c, CHAT_FORMAT_LFM2, NULL, "v", true) == 0);
    CHECKF(strcmp(c.data, lfm2_want) == 0, "lfm2 growing text: \"%s\"", c.data);
    chat_text_free(&c);
    tokenizer_free(t);
}

/* --- pre-tokenizers: splits checked against Python's `regex` module --------- */

struct joined {
    char s[256];
    size_t len;
};

static int join_piece(void *ctx, const char *piece, size_t len) {
    struct joined *j = ctx;
    if (j->len + len + 2 > sizeof j->s) return 1;
    if (j->len) j->s[j->len++] = '|';
    memcpy(j->s + j->len, piece, len);
    j->len += len;
    j->s[j->len] = 0;
    return 0;
}

static void test_pretok(void) {
    const char *text = "I'LL pay 12345 \xE2\x82\xAC!!\n\n  x\xC2\xA0y  ";
    static const struct { enum pretok_kind kind; const char *want; } cases[] = {
        {PRETOK_QWEN2, "I|'LL| pay| |1|2|3|4|5| \xE2\x82\xAC!!\n\n| | x|\xC2\xA0y|  "},
        {PRETOK_LLAMA3, "I|'LL| pay| |123|45| \xE2\x82\xAC!!\n\n| | x|\xC2\xA0y|  "},
        {PRETOK_GPT2, "I|'|LL| pay| 12345| \xE2\x82\xAC!!|\n\n | x|\xC2\xA0|y|  "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct joined j = {{0}, 0};
        CHECK(pretok_split(cases[i].kind, text, strlen(text), join_piece, &j) == 0);
        CHECKF(strcmp(j.s, cases[i].want) == 0, "pre-tokenizer %d: \"%s\"", (int)cases[i].kind, j.s);
    }
    /* Combining marks: other to Qwen2 and GPT-2, part of a letter run to
     * Qwen3.5 (U+0301, U+0308, Devanagari vowel signs). */
    const char *marks = "cafe\xCC\x81 \xCC\x81" "a x\xCC\x81 \xCC\x81\xCC\x81! -\xCC\x81\xCC\x81 nai\xCC\x88ve.\xCC\x88 "
                        "\xE0\xA4\x95\xE0\xA4\xBF\xE0\xA4\xA4\xE0\xA4\xBE\xE0\xA4\xAC 1\xCC\x81";
    static const struct { enum pretok_kind kind; const char *want; } mark_cases[] = {
        {PRETOK_QWEN2, "cafe|\xCC\x81| \xCC\x81|a| x|\xCC\x81| \xCC\x81\xCC\x81!| -\xCC\x81\xCC\x81| nai|\xCC\x88ve|"
                       ".\xCC\x88| \xE0\xA4\x95|\xE0\xA4\xBF\xE0\xA4\xA4|\xE0\xA4\xBE\xE0\xA4\xAC| |1|\xCC\x81"},
        {PRETOK_GPT2, "cafe|\xCC\x81| \xCC\x81|a| x|\xCC\x81| \xCC\x81\xCC\x81!| -\xCC\x81\xCC\x81| nai|\xCC\x88|ve|"
                      ".\xCC\x88| \xE0\xA4\x95|\xE0\xA4\xBF|\xE0\xA4\xA4|\xE0\xA4\xBE|\xE0\xA4\xAC| 1|\xCC\x81"},
        {PRETOK_QWEN35, "cafe\xCC\x81| \xCC\x81" "a| x\xCC\x81| \xCC\x81\xCC\x81|!| -|\xCC\x81\xCC\x81| nai\xCC\x88ve|"
                        ".\xCC\x88| \xE0\xA4\x95\xE0\xA4\xBF\xE0\xA4\xA4\xE0\xA4\xBE\xE0\xA4\xAC| |1|\xCC\x81"},
    };
    for (size_t i = 0; i < sizeof mark_cases / sizeof mark_cases[0]; i++) {
        struct joined j = {{0}, 0};
        CHECK(pretok_split(mark_cases[i].kind, marks, strlen(marks), join_piece, &j) == 0);
        CHECKF(strcmp(j.s, mark_cases[i].want) == 0, "pre-tokenizer %d on marks: \"%s\"", (int)mark_cases[i].kind, j.s);
    }
    /* The same as Qwen2 where there are no marks. */
    struct joined q2 = {{0}, 0}, q35 = {{0}, 0};
    CHECK(pretok_split(PRETOK_QWEN2, text, strlen(text), join_piece, &q2) == 0);
    CHECK(pretok_split(PRETOK_QWEN35, text, strlen(text), join_piece, &q35) == 0);
    CHECK(strcmp(q2.s, q35.s) == 0);
    /* A non-zero return from the callback stops the split. */
    CHECK(pretok_split(PRETOK_QWEN2, "a b c", 5, join_piece, &(struct joined){{0}, 250}) == 1);
}

int main(void) {
    test_pretok();
    test_qwen3_vocab();
    test_small_vocab();
    test_hostile_vocab();
    test_chat();
    return test_finish();
}
