/* moex profile: run a model over text or random tokens and record its
 * routing statistics (docs/stats-format.md). */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex profile [-m MODEL] [-f PROMPTS.txt | --random-tokens N] -o STATS [options]\n"
            "Runs the model and records, per layer and expert, how often the router chose\n"
            "it, with which other experts, and how often choices repeat on the next tokens;\n"
            "prints a per-layer summary and writes STATS (format: docs/stats-format.md).\n\n"
            "  -f, --file FILE     text to evaluate: each non-empty line is one sequence (- for\n"
            "                      standard input)\n"
            "      --random-tokens N  evaluate N random tokens instead (uniform over normal tokens;\n"
            "                      the default, with N = 4096)\n"
            "  -o, --output FILE   the statistics file\n"
            "      --seq N         tokens per sequence; longer lines are cut (default 512, or the\n"
            "                      context when it is shorter)\n"
            "      --seed N        seed of the random tokens (default 1)\n"
            "  -q, --quiet         no progress bar and no summary table\n");
    session_opts_help(out);
}

struct token_seqs {
    int32_t *ids;
    int64_t n;
    int64_t *starts;   /* (n_seqs + 1) */
    int n_seqs, cap_seqs;
};

static int seqs_push(struct token_seqs *s, const int32_t *ids, int64_t n, int seq_len) {
    for (int64_t off = 0; off < n; off += seq_len) {
        int64_t m = n - off < seq_len ? n - off : seq_len;
        int32_t *g = realloc(s->ids, (size_t)(s->n + m) * sizeof *g);
        if (!g) return -1;
        s->ids = g;
        memcpy(s->ids + s->n, ids + off, (size_t)m * sizeof *g);
        s->n += m;
        if (s->n_seqs + 2 > s->cap_seqs) {
            int cap = s->cap_seqs ? 2 * s->cap_seqs : 64;
            int64_t *st = realloc(s->starts, (size_t)cap * sizeof *st);
            if (!st) return -1;
            s->starts = st;
            s->cap_seqs = cap;
        }
        s->starts[s->n_seqs] = s->n - m;
        s->starts[++s->n_seqs] = s->n;
    }
    return 0;
}

/* Each non-empty line of the text is one sequence. */
static int seqs_from_text(const moex_model *m, const char *path, const char *text, size_t len, int seq_len,
                          struct token_seqs *s) {
    if (!moex_model_has_tokenizer(m)) return cli_fail("profile: the model has no tokenizer; use --random-tokens"), -1;
    int rc = 0;
    for (const char *line = text, *end = text + len; rc == 0 && line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n_line = nl ? (size_t)(nl - line) : (size_t)(end - line);
        const char *next = line + n_line + 1;
        while (n_line > 0 && line[n_line - 1] == '\r') n_line--;
        if (n_line > 0) {
            int n = 0;
            int32_t *ids = moex_tokenize_alloc(m, line, n_line, false, false, &n);
            if (!ids) rc = cli_fail("-f %s: %s", path, moex_last_error());
            else if (n > 0 && seqs_push(s, ids, n, seq_len)) rc = cli_fail("profile: out of memory");
            free(ids);
        }
        line = next;
    }
    if (rc == 0 && s->n == 0) rc = cli_fail("-f %s: no text", path);
    return rc ? -1 : 0;
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int seqs_random(const moex_model *m, int64_t n_tokens, uint64_t seed, int seq_len, struct token_seqs *s) {
    int V = moex_model_n_vocab(m), n_normal = 0;
    int32_t *normal = malloc((size_t)V * sizeof *normal), *ids = malloc((size_t)n_tokens * sizeof *ids);
    if (!normal || !ids) { free(normal); free(ids); return cli_fail("profile: out of memory"), -1; }
    for (int v = 0; v < V; v++)
        if (moex_token_is_normal(m, v)) normal[n_normal++] = v;
    if (!n_normal) for (int v = 0; v < V; v++) normal[n_normal++] = v;
    for (int64_t i = 0; i < n_tokens; i++) ids[i] = normal[splitmix(&seed) % (uint64_t)n_normal];
    int rc = seqs_push(s, ids, n_tokens, seq_len) ? cli_fail("profile: out of memory") : 0;
    free(normal);
    free(ids);
    return rc ? -1 : 0;
}

int cmd_profile(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    const char *file = NULL, *out = NULL;
    int64_t n_random = 0, seq_len = 512, seed = 1;
    bool quiet = false, seq_given = false;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v;
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { if (!(out = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--random-tokens")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--random-tokens", v, 1, (int64_t)1 << 32, &n_random))
                return 2;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--tokens")) {
            /* run takes --tokens as a list of ids and -n as a count to generate */
            cli_fail("profile: %s is now --random-tokens N (the number of random tokens to evaluate)", a);
            return 2;
        } else if (!strcmp(a, "--seq")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--seq", v, 1, 1 << 20, &seq_len)) return 2;
            seq_given = true;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--seed", v, 0, INT64_MAX, &seed)) return 2;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else return cli_usage("profile", "unknown option '%s'", a);
    }
    if (!out) return cli_usage("profile", "-o STATS is required");
    if (file && n_random) return cli_fail("profile: -f FILE and --random-tokens N exclude each other"), 2;
    if (!file && !n_random) n_random = 4096;
    if (session_opts_finish(&so)) return 2;
    int refused = outputs_check_session(&so, "-o", out);
    if (!refused) refused = outputs_check("-o", out, "-f", file);
    if (refused) return refused;
    /* Opened before the work: a bad path fails now, and the file appears whole or not at all. */
    moex_file *out_file = moex_file_create(out);
    if (!out_file) return cli_fail("profile: %s", moex_last_error());
    char *text = NULL;
    size_t text_len = 0;
    if (file && cli_read_input("-f", file, &text, &text_len)) { moex_file_discard(out_file); return 1; }
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { moex_file_discard(out_file); free(text); return opened; }
    if (seq_len > moex_n_ctx(s.mc)) {
        if (seq_given) {
            cli_fail("profile: --seq %lld is longer than the context of %d tokens (--ctx)", (long long)seq_len,
                     moex_n_ctx(s.mc));
            free(text);
            moex_file_discard(out_file);
            session_close(&s);
            return 2;
        }
        seq_len = moex_n_ctx(s.mc);
    }
    struct token_seqs seqs;
    memset(&seqs, 0, sizeof seqs);
    int rc = file ? seqs_from_text(s.mm, file, text, text_len, (int)seq_len, &seqs)
                  : seqs_random(s.mm, n_random, (uint64_t)seed, (int)seq_len, &seqs);
    free(text);
    moex_routing *st = NULL;
    if (rc == 0 && !(st = moex_routing_new(s.mc))) rc = cli_fail("%s", moex_last_error());
    if (rc == 0) {
        struct progress bar;
        bool show = !quiet;
        if (show) progress_begin(&bar, "profile", (uint64_t)seqs.n);
        int64_t done = 0;
        for (int q = 0; q < seqs.n_seqs && rc == 0; q++) {
            moex_truncate(s.mc, 0);
            moex_routing_begin_sequence(st);
            int64_t begin = seqs.starts[q], end = seqs.starts[q + 1];
            /* The half-way switch lands inside a sequence when there is only one. */
            int64_t half = seqs.n / 2;
            for (int64_t off = begin; off < end && rc == 0;) {
                int64_t n = end - off;
                if (off < half && off + n > half) n = half - off;
                moex_routing_set_half(st, off >= half);
                if (moex_eval(s.mc, seqs.ids + off, (int)n)) rc = cli_fail("%s", moex_last_error());
                off += n;
                done += n;
                if (show) progress_update(&bar, (uint64_t)done);
            }
        }
        if (show) progress_end(&bar);
    }
    if (rc == 0) {
        moex_file *f = out_file;
        out_file = NULL;
        if (moex_routing_write(st, f)) rc = cli_fail("%s", moex_last_error());
    }
    moex_file_discard(out_file);
    char *report = rc == 0 && !quiet ? moex_routing_report(st) : NULL;
    if (report) fputs(report, stdout);
    else if (rc == 0 && !quiet) rc = cli_fail("%s", moex_last_error());
    free(report);
    moex_routing_free(st);
    free(seqs.ids);
    free(seqs.starts);
    if (session_close(&s)) rc = 1;
    return rc ? 1 : 0;
}
