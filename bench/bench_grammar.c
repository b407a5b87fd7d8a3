/* The grammar mask's cost per token on a real vocabulary: a JSON document
 * is tokenized with the model's tokenizer and replayed through the matcher,
 * timing the mask of every step (the trie walk) and the accept.
 *   bench_grammar [VOCAB.gguf] [rounds]
 * VOCAB.gguf: a GGUF with a tokenizer (default: the oracle's 151,936-token
 * Qwen3 vocabulary). Prints a markdown table; times are the thread's CPU
 * time. */
#include "core/error.h"
#include "gguf/gguf.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This thread's CPU time, not the wall clock: on a shared machine the wall
 * clock counts the time other processes run. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":8},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\"}},\"required\":[\"street\",\"city\",\"zip\"],\"additionalProperties\":false},"
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"},"
    "\"role\":{\"enum\":[\"admin\",\"user\",\"guest\"]}},"
    "\"required\":[\"name\",\"age\",\"email\",\"tags\",\"address\",\"score\",\"active\",\"role\"],"
    "\"additionalProperties\":false}";

/* A document of the schema, as a model would write it. */
static const char *const DOC =
    "{\n  \"name\": \"Ada Lovelace-Byron\",\n  \"age\": 36,\n  \"email\": \"ada@analytical.engine.org\",\n"
    "  \"tags\": [\"mathematics\", \"poetry of science\", \"Bernoulli numbers\", \"notes G\"],\n"
    "  \"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"SW1Y 4JH\"},\n"
    "  \"score\": 98.75,\n  \"active\": false,\n  \"role\": \"admin\"\n}";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stats {
    double mean, median, p90, max;
};

static struct stats summarize(double *v, int n) {
    struct stats s = { 0 };
    for (int i = 0; i < n; i++) s.mean += v[i] / n;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.median = v[n / 2];
    s.p90 = v[(n * 9) / 10];
    s.max = v[n - 1];
    return s;
}

/* Replays ids through the grammar `rounds` times; prints one table row:
 * the trie walk alone (every step walked), and the sampler's step as moex
 * runs it (its cache of masks by state, then the logits set to -inf). */
static int run(const char *label, const char *gbnf, const struct grammar_vocab *v, const int32_t *ids, int n, int rounds) {
    int steps = n * rounds, n_vocab = grammar_vocab_n_tokens(v);
    double *walk_us = malloc(sizeof *walk_us * (size_t)steps), *step_us = malloc(sizeof *step_us * (size_t)steps);
    double *accept_us = malloc(sizeof *accept_us * (size_t)steps), *allowed = malloc(sizeof *allowed * (size_t)steps);
    uint8_t *m = malloc((size_t)n_vocab);
    float *logits = malloc(sizeof *logits * (size_t)n_vocab);
    if (!walk_us || !step_us || !accept_us || !allowed || !m || !logits) return -1;
    int k = 0;
    for (int r = 0; r < rounds; r++) {
        struct grammar *g = grammar_parse(gbnf, NULL), *g2 = grammar_parse(gbnf, NULL);
        if (!g || !g2) { fprintf(stderr, "%s: %s\n", label, moex_error()); return -1; }
        struct grammar_matcher *mt = grammar_matcher_new(g);
        struct grammar_sampler *gs = grammar_sampler_new(g2, v);
        for (int i = 0; i < n; i++, k++) {
            for (int t = 0; t < n_vocab; t++) logits[t] = (float)(t % 97);
            double t0 = cpu_s();
            int a = grammar_mask(mt, v, m);
            double t1 = cpu_s();
            int rc = grammar_sampler_apply(gs, logits, n_vocab);
            double t2 = cpu_s();
            if (a < 0 || rc < 0 || !m[ids[i]] || logits[ids[i]] < 0) {
                fprintf(stderr, "%s: token %d (step %d) not allowed\n", label, ids[i], i);
                return -1;
            }
            double t3 = cpu_s();
            if (grammar_accept_token(mt, v, ids[i]) != 0 || grammar_sampler_accept(gs, ids[i]) != 0) {
                fprintf(stderr, "%s: %s\n", label, moex_error());
                return -1;
            }
            accept_us[k] = (cpu_s() - t3) * 1e6 / 2;
            walk_us[k] = (t1 - t0) * 1e6;
            step_us[k] = (t2 - t1) * 1e6;
            allowed[k] = a;
        }
        grammar_matcher_free(mt);
        grammar_sampler_free(gs);
        grammar_free(g);
    }
    struct stats ws = summarize(walk_us, steps), ss = summarize(step_us, steps), as = summarize(accept_us, steps),
                 al = summarize(allowed, steps);
    printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.0f |\n", label, n, ws.mean, ws.median, ws.p90,
           ss.mean, ss.median, ss.p90, as.mean, al.median);
    free(walk_us);
    free(step_us);
    free(accept_us);
    free(allowed);
    free(m);
    free(logits);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/oracle/tokenizer/qwen3-vocab.gguf";
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    struct gguf_file *f = gguf_open(path);
    struct tokenizer *t = f ? tokenizer_load(f) : NULL;
    if (f) gguf_close(f);
    if (!t) { fprintf(stderr, "%s: %s\n", path, moex_error()); return 1; }
    double t0 = cpu_s();
    struct grammar_vocab *v = grammar_vocab_from_tokenizer(t);
    double build_ms = (cpu_s() - t0) * 1e3;
    if (!v) { fprintf(stderr, "%s\n", moex_error()); return 1; }
    int n = 0;
    int32_t *ids = tokenizer_encode_alloc(t, DOC, strlen(DOC), false, &n);
    char *schema_gbnf = json_schema_to_grammar(SCHEMA), *object_gbnf = json_schema_to_grammar(NULL);
    if (!ids || !schema_gbnf || !object_gbnf) { fprintf(stderr, "%s\n", moex_error()); return 1; }
    printf("vocabulary: %d tokens, trie of %d nodes, built in %.0f ms (once per model)\n\n", tokenizer_n_vocab(t),
           grammar_vocab_n_nodes(v), build_ms);
    printf("| grammar | tokens | walk us mean | median | p90 | sampler step us mean | median | p90 | accept us | allowed median |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = run("json_schema (8 properties, nested)", schema_gbnf, v, ids, n, rounds);
    if (rc == 0) rc = run("json_object (any object)", object_gbnf, v, ids, n, rounds);
    if (rc == 0) {
        /* a literal-heavy grammar: the walk stops at the first byte of almost every token */
        struct json_buf lit = { 0 };
        json_buf_puts(&lit, "root ::= ");
        json_schema_literal(&lit, DOC, strlen(DOC));
        json_buf_puts(&lit, "\n");
        rc = run("the document as one literal", lit.s, v, ids, n, rounds);
        free(lit.s);
    }
    free(schema_gbnf);
    free(object_gbnf);
    free(ids);
    grammar_vocab_free(v);
    tokenizer_free(t);
    return rc ? 1 : 0;
}
