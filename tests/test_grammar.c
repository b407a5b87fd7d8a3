/* Grammars: the GBNF parser (and its errors), the matcher on strings it must
 * take and refuse, the token mask against a brute-force check of every token
 * of the real Qwen3 vocabulary, JSON schemas converted and run, and
 * constrained generation through moex.h on an oracle model. */
#include "harness.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "moex_tools.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* The whole of s is a sentence of the grammar. */
static bool matches(const char *gbnf, const char *s) {
    struct grammar *g = grammar_parse(gbnf, NULL);
    if (!g) return false;
    struct grammar_matcher *m = grammar_matcher_new(g);
    bool ok = m && grammar_matcher_accept(m, s, strlen(s)) == 0 && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    grammar_free(g);
    return ok;
}

static void test_parse_errors(void) {
    static const struct { const char *text, *want; } cases[] = {
        { "root ::= \"a\" foo\n", "line 1, column 14: rule 'foo' is not defined" },
        { "root ::= \"a\"\nx ::= (\"b\"\n", "line 2, column 7: unclosed '('" },
        { "root ::= [a-\n", "line 1, column 10: unterminated character class" },
        { "root ::= \"abc\n", "line 1, column 10: unterminated string literal" },
        { "root ::= \"a\" \"\\q\"\n", "line 1, column 15: unknown escape '\\q'" },
        { "root ::= [z-a]\n", "line 1, column 12: range end" },
        { "root ::= \"a\"{3,1}\n", "line 1, column 13: {3,1}" },
        { "root ::= * \"a\"\n", "line 1, column 10: '*' follows nothing" },
        { "# c\n\nroot = \"a\"\n", "line 3, column 6: expected '::='" },
        { "root ::= \"a\" )\n", "line 1, column 14: ')' without '('" },
        { "root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice" },
        { "root ::= root \"a\" | \"b\"\n", "rule 'root' is left-recursive" },
        { "root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"\n", "rule 'x' is left-recursive" },
        { "root ::= (\"a\"?)*\n", "left-recursive" },
        { "x ::= \"a\"\n", "there is no rule 'root'" },
        { "root ::= \"\\u12\"\n", "\\u needs 4 hex digits" },
        { "root ::= \"a\"{99999}\n", "a repetition count above" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        moex_clear_error();
        struct grammar *g = grammar_parse(cases[i].text, NULL);
        CHECKF(!g, "case %zu parsed", i);
        CHECKF(strstr(moex_error(), cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, moex_error(), cases[i].want);
        grammar_free(g);
    }
    struct grammar *g = grammar_parse("start ::= \"x\"\n", "start");
    CHECK(g != NULL);
    grammar_free(g);
}

static void test_matcher(void) {
    static const struct { const char *gbnf, *s; bool want; } cases[] = {
        { "root ::= \"abc\"", "abc", true },
        { "root ::= \"abc\"", "ab", false },
        { "root ::= \"abc\"", "abcd", false },
        { "root ::= \"a\" | \"b\" c\nc ::= [0-9]+", "b123", true },
        { "root ::= \"a\" | \"b\" c\nc ::= [0-9]+", "b", false },
        { "root ::= [^a-c]*", "xyz\xc3\xa9", true },
        { "root ::= [^a-c]*", "xaz", false },
        { "root ::= \"x\"{2,3}", "x", false },
        { "root ::= \"x\"{2,3}", "xx", true },
        { "root ::= \"x\"{2,3}", "xxx", true },
        { "root ::= \"x\"{2,3}", "xxxx", false },
        { "root ::= \"ab\"{2}", "abab", true },
        { "root ::= \"ab\"{2,}", "ababab", true },
        { "root ::= (\"a\" | \"bc\")? \"d\"", "d", true },
        { "root ::= (\"a\" | \"bc\")? \"d\"", "bcd", true },
        { "root ::= (\"a\" | \"bc\")? \"d\"", "bd", false },
        { "root ::= .", "\xe2\x82\xac", true },          /* one code point, three bytes */
        { "root ::= .", "\xe2\x82", false },             /* unfinished */
        { "root ::= [\\u20AC]", "\xe2\x82\xac", true },
        { "root ::= [a-z\\x41]", "A", true },
        { "root ::= \"\\\"\\n\\t\"", "\"\n\t", true },
        { "root ::= x x\nx ::= \"a\" | \"aa\"", "aaa", true },   /* ambiguous: both splits live */
        { "root ::= ( # comment\n  \"a\"\n  | \"b\" )\n", "b", true },
        { "root ::=\n  \"a\" t\nt ::= \"b\"", "ab", true },
        { "root ::= r\nr ::= \"(\" r \")\" | \"\"", "((()))", true },
        { "root ::= r\nr ::= \"(\" r \")\" | \"\"", "(()", false },
        { "root ::= [\\xff]", "\xc3\xbf", true },
        { "root ::= \"a\"", "\xff", false },             /* not UTF-8 */
        { "root ::= \" \"", "\xe0\x80\xa0", false },      /* an overlong space */
        { "root ::= \"a\"", "\xf0\x80\x81\xa1", false },  /* an overlong 'a' */
        { "root ::= [^a]", "\xed\xa0\x80", false },      /* a surrogate */
        { "root ::= [^a]", "\xf4\x90\x80\x80", false }, /* past U+10FFFF */
        { "root ::= [^a]", "\xf4\x8f\xbf\xbf", true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(matches(cases[i].gbnf, cases[i].s) == cases[i].want, "case %zu: \"%s\" on %s (%s)", i, cases[i].s,
               cases[i].gbnf, moex_error());
    /* a refused byte leaves the matcher as it was; byte by byte equals all at once */
    struct grammar *g = grammar_parse("root ::= \"ab\" [0-9]* \"c\"", NULL);
    struct grammar_matcher *m = grammar_matcher_new(g);
    CHECK(grammar_matcher_accept(m, "a", 1) == 0);
    CHECK(grammar_matcher_accept(m, "x", 1) != 0);
    CHECK(grammar_matcher_accept(m, "b", 1) == 0);
    int refused = 0;
    for (int i = 0; i < 100000; i++) refused += grammar_matcher_accept(m, "7", 1) != 0;
    CHECK(refused == 0);
    CHECK(!grammar_matcher_can_end(m));
    CHECK(grammar_matcher_check(m, "c", 1));
    CHECK(!grammar_matcher_done(m));
    CHECK(grammar_matcher_accept(m, "c", 1) == 0);
    CHECK(grammar_matcher_can_end(m) && grammar_matcher_done(m));
    grammar_matcher_free(m);
    grammar_free(g);
}

static char *schema_grammar(const char *schema) {
    char *gbnf = json_schema_to_grammar(schema);
    CHECKF(gbnf != NULL, "%s: %s", schema, moex_error());
    return gbnf;
}

static void test_json_schema(void) {
    static const struct { const char *schema, *json; bool want; } cases[] = {
        { NULL, "{\"a\": [1, 2.5e3, \"x\\u0041\", true, null, {}]}", true },
        { NULL, "[1]", false },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
          "\"required\":[\"a\"],\"additionalProperties\":false}", "{\"a\": -12, \"b\": \"hi\"}", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
          "\"required\":[\"a\"],\"additionalProperties\":false}", "{\"a\":3}", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
          "\"required\":[\"a\"],\"additionalProperties\":false}", "{\"b\":\"x\"}", false },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
          "\"required\":[\"a\"]}", "{\"a\": 1.5}", false },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}", "{}", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}",
          "{\"b\":\"\"}", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}",
          "{\"b\":\"\",\"a\":1}", false },   /* properties in their order */
        { "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":3}", "[\"x\", 2]", true },
        { "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":3}", "[]", false },
        { "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":3}", "[2,2,2,2]", false },
        { "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":3}", "[3]", false },
        { "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", true },
        { "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", false },
        { "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\\n\\u00e9\"", true },
        { "{\"const\":{\"k\":[1,\"v\"]}}", "{\"k\":[1,\"v\"]}", true },
        { "{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", "null", true },
        { "{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", "0", false },
        { "{\"type\":[\"number\",\"string\"]}", "-0.5E+2", true },
        { "{\"type\":\"number\"}", "01", false },
        { "{\"maxLength\":2}", "\"abc\"", false },        /* a string's keyword without "type" */
        { "{\"type\":\"string\",\"format\":\"date\"}", "\"2026-12-04\"", true },
        { "{\"type\":\"string\",\"format\":\"date\"}", "\"2026-13-04\"", false },
        { "{\"type\":\"string\",\"format\":\"time\"}", "\"17:38:05.25+01:00\"", true },
        { "{\"type\":\"string\",\"format\":\"time\"}", "\"24:00:00Z\"", false },
        { "{\"format\":\"date-time\"}", "\"2026-12-04T17:38:05Z\"", true },
        { "{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", true },
        { "{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567e89b12d3a456426614174000\"", false },
        { "{\"maxItems\":1}", "[1,2]", false },
        { "{\"type\":\"number\"}", "12345678901234567", false },   /* digit runs are bounded */
        { "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
          "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"],"
          "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
          "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}",
          "{ \"a\" :\n   true }", true },
        { "{\"$defs\":{\"a.b\":{\"type\":\"integer\"},\"a-b\":{\"type\":\"null\"}},\"type\":\"array\","
          "\"items\":{\"anyOf\":[{\"$ref\":\"#/$defs/a.b\"},{\"$ref\":\"#/$defs/a-b\"}]}}", "[1, null]", true },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}",
          "{\"a\":                      true}", false },   /* whitespace is bounded */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *gbnf = schema_grammar(cases[i].schema);
        if (!gbnf) continue;
        CHECKF(matches(gbnf, cases[i].json) == cases[i].want, "case %zu: %s against %s (%s)\n%s", i, cases[i].json,
               cases[i].schema ? cases[i].schema : "(any object)", moex_error(), gbnf);
        free(gbnf);
    }
    static const struct { const char *schema, *want; } refused[] = {
        { "{\"type\":\"string\",\"pattern\":\"^a$\"}", "unsupported keyword 'pattern'" },
        { "{\"type\":\"integer\",\"multipleOf\":3}", "unsupported keyword 'multipleOf'" },
        { "{\"type\":\"string\",\"format\":\"email\"}", "unsupported 'format' \"email\"" },
        { "{\"oneOf\":[{\"type\":\"string\"}]}", "unsupported keyword 'oneOf'" },
        { "{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":true}", "additionalProperties" },
        { "{\"$ref\":\"http://x/y\"}", "only #/$defs/NAME" },
        { "{\"$ref\":\"#/$defs/none\"}", "points at nothing" },
        { "{\"type\":\"thing\"}", "unknown type 'thing'" },
        { "{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'required' names a property" },
        { "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "'maxItems' is below 'minItems'" },
        { "{\"type\": ", "json: unexpected end" },
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        moex_clear_error();
        char *gbnf = json_schema_to_grammar(refused[i].schema);
        CHECKF(!gbnf && strstr(moex_error(), refused[i].want), "case %zu: \"%s\" lacks \"%s\"", i, moex_error(),
               refused[i].want);
        free(gbnf);
    }
}

/* Integer ranges (minimum, maximum, exclusive bounds): every integer in
 * -1300..1300 is taken exactly when it is in the range, no leading zeros. */
static void test_integer_ranges(void) {
    static const struct { const char *bounds; long lo, hi; } ranges[] = {
        { "\"minimum\":0,\"maximum\":0", 0, 0 },          { "\"minimum\":1,\"maximum\":9", 1, 9 },
        { "\"minimum\":7,\"maximum\":12", 7, 12 },         { "\"minimum\":-5,\"maximum\":5", -5, 5 },
        { "\"minimum\":-123,\"maximum\":-7", -123, -7 },   { "\"minimum\":95,\"maximum\":1234", 95, 1234 },
        { "\"minimum\":-1000,\"maximum\":-1000", -1000, -1000 },
        { "\"exclusiveMinimum\":9,\"exclusiveMaximum\":100", 10, 99 },
        { "\"minimum\":2.5,\"maximum\":7.5", 3, 7 },       { "\"minimum\":-20", -20, 9999 },
        { "\"maximum\":-3", -9999, -3 },
    };
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", ranges[r].bounds);
        char *gbnf = schema_grammar(schema);
        struct grammar *g = gbnf ? grammar_parse(gbnf, NULL) : NULL;
        CHECKF(g != NULL, "%s: %s", schema, moex_error());
        int wrong = 0;
        for (long x = -1300; g && x <= 1300; x++) {
            char num[16];
            snprintf(num, sizeof num, "%ld", x);
            struct grammar_matcher *m = grammar_matcher_new(g);
            bool took = grammar_matcher_accept(m, num, strlen(num)) == 0 && grammar_matcher_can_end(m);
            wrong += took != (x >= ranges[r].lo && x <= ranges[r].hi);
            grammar_matcher_free(m);
        }
        CHECKF(wrong == 0, "%s: %d integers wrong", schema, wrong);
        CHECK(gbnf && !matches(gbnf, "-0") && !matches(gbnf, "007"));
        grammar_free(g);
        free(gbnf);
    }
    moex_clear_error();
    CHECK(!json_schema_to_grammar("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}"));
    CHECKF(strstr(moex_error(), "no integer is within"), "%s", moex_error());
    CHECK(!json_schema_to_grammar("{\"type\":\"number\",\"minimum\":0}"));
    CHECKF(strstr(moex_error(), "integers only"), "%s", moex_error());
}

/* The mask equals a check of every token's bytes on its own, at states along
 * a JSON document and inside a multi-byte character. */
static void test_mask_brute_force(void) {
    struct gguf_file *f = gguf_open(oracle_path("tokenizer/qwen3-vocab.gguf"));
    CHECK(f != NULL);
    if (!f) return;
    struct tokenizer *t = tokenizer_load(f);
    gguf_close(f);
    CHECK(t != NULL);
    if (!t) return;
    struct grammar_vocab *v = grammar_vocab_from_tokenizer(t);
    CHECK(v != NULL && grammar_vocab_n_tokens(v) == tokenizer_n_vocab(t));
    char *gbnf = json_schema_to_grammar("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                                        "\"maxLength\":12},\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\","
                                        "\"items\":{\"enum\":[\"a\\u00e9\",\"b\"]}}},\"required\":[\"name\",\"n\"]}");
    struct grammar *g = gbnf ? grammar_parse(gbnf, NULL) : NULL;
    struct grammar_matcher *m = g ? grammar_matcher_new(g) : NULL;
    CHECK(m != NULL);
    int n = grammar_vocab_n_tokens(v);
    uint8_t *mask = malloc((size_t)n);
    static const char *const steps[] = { "", "{", " \"name\"", ":", " \"J\xc3", "\xa9r", "\xc3\xb4me\"", ",\"n\":",
                                          "-", "42", ", \"tags\": [\"a", "\xc3", "\xa9\"", "]", "}" };
    for (size_t s = 0; m && mask && s < sizeof steps / sizeof steps[0]; s++) {
        CHECKF(grammar_matcher_accept(m, steps[s], strlen(steps[s])) == 0, "step %zu", s);
        int allowed = grammar_mask(m, v, mask);
        int brute = 0, differ = 0;
        for (int id = 0; id < n; id++) {
            size_t len;
            const char *piece = tokenizer_decode_token(t, id, &len);
            int type = tokenizer_token_type(t, id);
            bool want;
            if (tokenizer_is_eog(t, id)) want = grammar_matcher_can_end(m);
            else if (type == TOKEN_CONTROL || type == TOKEN_UNUSED || type == TOKEN_UNKNOWN || len == 0) want = false;
            else want = grammar_matcher_check(m, piece, len);
            brute += want;
            differ += want != (mask[id] != 0);
        }
        CHECKF(differ == 0 && brute == allowed, "step %zu: %d tokens differ (mask %d, brute force %d)", s, differ,
               allowed, brute);
        CHECKF(allowed > 0, "step %zu allows nothing", s);
    }
    CHECK(m && grammar_matcher_can_end(m) && !grammar_matcher_done(m));   /* trailing space may follow */

    /* classes that take some characters past ASCII and not others: the
     * subtrees of whole characters are taken only where every one loops */
    static const char *const other[] = { "root ::= \"x\" [a-z\\u00e0-\\u00ff ]* \"y\"\n",
                                         "root ::= \"x\" [^\\u4e00-\\u9fff\\x00-\\x1f\"]* \"y\"\n",
                                         "root ::= \"x\" ([^y] [^y])* \"y\"\n" };
    static const char *const other_steps[] = { "", "x", "ab ", "\xc3", "\xa9", "qq" };
    for (size_t k = 0; mask && k < sizeof other / sizeof other[0]; k++) {
        struct grammar *og = grammar_parse(other[k], NULL);
        struct grammar_matcher *om = og ? grammar_matcher_new(og) : NULL;
        CHECKF(om != NULL, "%s: %s", other[k], moex_error());
        for (size_t s = 0; om && s < sizeof other_steps / sizeof other_steps[0]; s++) {
            if (grammar_matcher_accept(om, other_steps[s], strlen(other_steps[s])) != 0) break;
            grammar_mask(om, v, mask);
            int differ = 0;
            for (int id = 0; id < n; id++) {
                size_t len;
                const char *piece = tokenizer_decode_token(t, id, &len);
                int type = tokenizer_token_type(t, id);
                bool want = tokenizer_is_eog(t, id) ? grammar_matcher_can_end(om)
                          : type == TOKEN_CONTROL || type == TOKEN_UNUSED || type == TOKEN_UNKNOWN || len == 0
                              ? false : grammar_matcher_check(om, piece, len);
                differ += want != (mask[id] != 0);
            }
            CHECKF(differ == 0, "grammar %zu step %zu: %d tokens differ", k, s, differ);
        }
        grammar_matcher_free(om);
        grammar_free(og);
    }

    /* the sampler's masks (cached by parse state: a long string repeats
     * one) equal fresh walks, token by token through a document */
    const char *doc = "{\"name\": \"Ann\", \"n\": 7, \"tags\": [\"b\", \"b\"], \"zz\": \"a long string, and longer "
                      "still, with \\\"quotes\\\" and \xc3\xa9t\xc3\xa9\"}";
    char *free_gbnf = json_schema_to_grammar("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                                             "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\"},"
                                             "\"zz\":{\"type\":\"string\"}}}");
    struct grammar *g1 = free_gbnf ? grammar_parse(free_gbnf, NULL) : NULL, *g2 = free_gbnf ? grammar_parse(free_gbnf, NULL) : NULL;
    struct grammar_matcher *fresh = g1 ? grammar_matcher_new(g1) : NULL;
    struct grammar_sampler *gs = g2 ? grammar_sampler_new(g2, v) : NULL;
    float *logits = malloc(sizeof *logits * (size_t)n);
    int n_ids = 0;
    int32_t *ids = tokenizer_encode_alloc(t, doc, strlen(doc), false, &n_ids);
    CHECK(fresh && gs && logits && ids && n_ids > 20);
    int steps_differ = 0;
    for (int i = 0; fresh && gs && logits && ids && mask && i < n_ids; i++) {
        for (int k = 0; k < n; k++) logits[k] = 0;
        CHECK(grammar_sampler_apply(gs, logits, n) == 0);
        grammar_mask(fresh, v, mask);
        int differ = 0;
        for (int k = 0; k < n; k++) differ += (logits[k] == 0) != (mask[k] != 0);
        steps_differ += differ != 0;
        CHECKF(grammar_sampler_accept(gs, ids[i]) == 0 && grammar_accept_token(fresh, v, ids[i]) == 0, "token %d", i);
    }
    CHECKF(steps_differ == 0, "%d steps' masks differ", steps_differ);
    free(ids);
    free(logits);
    grammar_sampler_free(gs);
    grammar_matcher_free(fresh);
    grammar_free(g1);
    free(free_gbnf);
    free(mask);
    grammar_matcher_free(m);
    grammar_free(g);
    free(gbnf);
    grammar_vocab_free(v);
    tokenizer_free(t);
}

/* Constrained generation through moex.h: every seed's text is a sentence of
 * the grammar, ended by the model's end token. */
static void test_generate(void) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = oracle_path("models/qwen3moe-o1-Q8_0.gguf");
    mp.n_threads = 1;
    moex_model *model = moex_model_load(&mp);
    CHECKF(model != NULL, "%s", moex_last_error());
    if (!model) return;
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = 256;
    moex_context *ctx = moex_context_new(model, &cp);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"word\":{\"type\":"
                         "\"string\",\"maxLength\":6},\"k\":{\"enum\":[1,2,3]}},\"required\":[\"ok\",\"word\",\"k\"],"
                         "\"additionalProperties\":false}";
    char *gbnf = moex_json_schema_to_grammar(schema);
    CHECK(gbnf != NULL);
    int32_t prompt[64];
    int n_prompt = moex_tokenize(model, "Answer in JSON:", 15, false, false, prompt, 64);
    CHECKF(n_prompt > 0, "%s", moex_last_error());
    for (int seed = 0; ctx && gbnf && seed < 8; seed++) {
        struct moex_sampler_params sp;
        moex_sampler_params_default(&sp);
        sp.seed = (uint64_t)seed;
        sp.temperature = 1.5f;
        moex_sampler *s = moex_sampler_new(model, &sp);
        CHECK(moex_sampler_set_grammar(s, gbnf, NULL) == 0);
        struct json_buf out = { 0 };
        int32_t ids[200];
        int n = 0;
        moex_truncate(ctx, 0);
        int rc = moex_eval(ctx, prompt, n_prompt);
        for (int i = 0; rc == 0 && i < 200; i++) {
            int32_t id = moex_sample(s, ctx);
            if (id < 0 || moex_token_is_eog(model, id)) break;
            ids[n++] = id;
            rc = moex_eval(ctx, &id, 1);
        }
        size_t len = 0;
        char *text = moex_detokenize(model, ids, n, &len);
        CHECKF(text && matches(gbnf, text), "seed %d: %s", seed, text ? text : "(none)");
        CHECKF(n < 200, "seed %d ran to the limit", seed);
        free(text);
        free(out.s);
        moex_sampler_free(s);
    }
    moex_sampler *s = moex_sampler_new(model, NULL);
    moex_clear_error();
    CHECK(moex_sampler_set_grammar(s, "root ::= \"a\"\nbad\n", NULL) == -1);
    CHECKF(strstr(moex_last_error(), "line 2, column 4"), "%s", moex_last_error());
    CHECK(moex_sampler_set_grammar(s, NULL, NULL) == 0);
    moex_sampler_free(s);
    free(gbnf);
    moex_context_free(ctx);
    moex_model_free(model);
}

/* Empty classes ([] and [^], found by fuzzing: sorting no ranges from a NULL
 * list was undefined behaviour) parse or are refused, never crash. */
static void test_empty_classes(void) {
    static const char *const texts[] = { "root ::= \"a\" [^]", "root ::= [] | \"b\"",
                                         "7::=k[^]\\u00e9l[^a-z]," };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        struct grammar *g = grammar_parse(texts[i], NULL);
        CHECKF(g != NULL || moex_error()[0], "%s: neither a grammar nor an error", texts[i]);
        grammar_free(g);
    }
}

/* A grammar that only accepts the empty string ("root ::=", found by
 * fuzzing: its state has no stack tops, and a NULL tops array was offset,
 * sorted and compared) allows the end token alone, at once and after a
 * refused byte. */
static void test_empty_grammar(void) {
    const char *pieces[] = { "a", "b", "ab", "" };
    size_t lens[] = { 1, 1, 2, 0 };
    uint8_t kinds[] = { GRAMMAR_TOKEN_TEXT, GRAMMAR_TOKEN_TEXT, GRAMMAR_TOKEN_TEXT, GRAMMAR_TOKEN_END };
    struct grammar_vocab *v = grammar_vocab_new(4, pieces, lens, kinds);
    struct grammar *g = grammar_parse("root ::=", NULL);
    struct grammar_matcher *m = g ? grammar_matcher_new(g) : NULL;
    CHECKF(v && m, "%s", moex_error());
    if (v && m) {
        for (int round = 0; round < 2; round++) {
            uint8_t allowed[4];
            CHECK(grammar_mask(m, v, allowed) == 1);
            CHECK(!allowed[0] && !allowed[1] && !allowed[2] && allowed[3]);
            CHECK(grammar_matcher_can_end(m) && grammar_matcher_done(m));
            CHECK(!grammar_matcher_check(m, "a", 1));
            CHECK(grammar_matcher_accept(m, "a", 1) == -1);
        }
    }
    grammar_matcher_free(m);
    grammar_free(g);
    grammar_vocab_free(v);
}

int main(void) {
    test_empty_classes();
    test_empty_grammar();
    test_parse_errors();
    test_matcher();
    test_json_schema();
    test_integer_ranges();
    test_mask_brute_force();
    test_generate();
    return test_finish();
}
