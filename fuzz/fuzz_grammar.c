/* libFuzzer target for the grammar parser, the matcher, the token mask and
 * the JSON schema converter. The input is text and bytes to match, split at
 * the first NUL: the text as GBNF, then as a JSON schema; a refusal must come
 * with a message, and a schema that converts must give a grammar that
 * parses. Whatever parses runs the bytes through the matcher and the mask
 * over a small vocabulary (every byte, a few multi-byte pieces, an end
 * token), and the mask must agree with checking each token alone. */
#include "core/error.h"
#include "text/grammar.h"
#include "text/json_schema.h"

#include <stdlib.h>
#include <string.h>

#define N_TOKENS 264

static const char *const pieces_extra[] = { "ab", "{\"", "\": ", "\xc3\xa9", "\xe2\x82", "\xac", "  " };

static struct grammar_vocab *vocab(void) {
    static char bytes[256];
    const char *pieces[N_TOKENS];
    size_t lens[N_TOKENS];
    uint8_t kinds[N_TOKENS];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        pieces[i] = &bytes[i];
        lens[i] = 1;
        kinds[i] = GRAMMAR_TOKEN_TEXT;
    }
    for (int i = 0; i < 7; i++) {
        pieces[256 + i] = pieces_extra[i];
        lens[256 + i] = strlen(pieces_extra[i]);
        kinds[256 + i] = GRAMMAR_TOKEN_TEXT;
    }
    pieces[263] = "";
    lens[263] = 0;
    kinds[263] = GRAMMAR_TOKEN_END;
    return grammar_vocab_new(N_TOKENS, pieces, lens, kinds);
}

static void run(struct grammar *g, const struct grammar_vocab *v, const uint8_t *input, size_t n) {
    struct grammar_matcher *m = grammar_matcher_new(g);
    if (!m) return;
    uint8_t allowed[N_TOKENS];
    for (size_t i = 0; i <= n && i < 64; i++) {
        int n_allowed = grammar_mask(m, v, allowed);
        if (n_allowed < 0) break;
        int text_allowed = 0;
        for (int t = 0; t < 263; t++) {
            text_allowed += allowed[t] != 0;
            char b = (char)t;
            const char *p = t < 256 ? &b : pieces_extra[t - 256];
            size_t len = t < 256 ? 1 : strlen(p);
            if (grammar_matcher_check(m, p, len) != (allowed[t] != 0)) abort();
        }
        /* the end token: where the grammar may end, or alone when nothing else is */
        if ((allowed[263] != 0) != (grammar_matcher_can_end(m) || text_allowed == 0)) abort();
        if (i == n) break;
        grammar_matcher_accept(m, (const char *)&input[i], 1);
    }
    grammar_matcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct grammar_vocab *v;
    if (!v && !(v = vocab())) abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    char *text = malloc(text_len + 1);
    if (!text) return 0;
    memcpy(text, data, text_len);
    text[text_len] = 0;
    const uint8_t *rest = nul ? nul + 1 : data + size;
    size_t rest_len = (size_t)(data + size - rest);
    moex_clear_error();
    struct grammar *g = grammar_parse(text, NULL);
    if (!g && !moex_error()[0]) abort();
    if (g) run(g, v, rest, rest_len);
    grammar_free(g);
    moex_clear_error();
    char *gbnf = json_schema_to_grammar(text);
    if (!gbnf && !moex_error()[0]) abort();
    if (gbnf) {
        struct grammar *sg = grammar_parse(gbnf, NULL);
        if (!sg) abort();   /* the converter's grammars always parse */
        run(sg, v, rest, rest_len);
        grammar_free(sg);
    }
    free(gbnf);
    free(text);
    return 0;
}
