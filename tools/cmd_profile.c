/* moex profile: run a model over text or random tokens and record its
 * routing statistics (docs/stats-format.md). */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "gguf/gguf.h"
#include "moe/routing_stats.h"
#include "pack/packfile.h"
#include "text/tokenizer.h"

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
            "      --seq N         tokens per sequence; longer lines are cut (default 512)\n"
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
static int seqs_from_text(const struct model *m, const char *path, const char *text, size_t len, int seq_len,
                          struct token_seqs *s) {
    if (!m->tok) return cli_fail("profile: the model has no tokenizer; use --random-tokens"), -1;
    int rc = 0;
    for (const char *line = text, *end = text + len; rc == 0 && line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n_line = nl ? (size_t)(nl - line) : (size_t)(end - line);
        const char *next = line + n_line + 1;
        while (n_line > 0 && line[n_line - 1] == '\r') n_line--;
        if (n_line > 0) {
            int n = 0;
            int32_t *ids = tokenizer_encode_alloc(m->tok, line, n_line, false, &n);
            if (!ids) rc = cli_fail("-f %s: %s", path, moex_error());
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

static int seqs_random(const struct model *m, int64_t n_tokens, uint64_t seed, int seq_len, struct token_seqs *s) {
    int V = m->hp.n_vocab, n_normal = 0;
    int32_t *normal = malloc((size_t)V * sizeof *normal), *ids = malloc((size_t)n_tokens * sizeof *ids);
    if (!normal || !ids) { free(normal); free(ids); return cli_fail("profile: out of memory"), -1; }
    for (int v = 0; v < V; v++)
        if (!m->tok || v >= tokenizer_n_vocab(m->tok) || tokenizer_token_type(m->tok, v) == TOKEN_NORMAL) normal[n_normal++] = v;
    if (!n_normal) for (int v = 0; v < V; v++) normal[n_normal++] = v;
    for (int64_t i = 0; i < n_tokens; i++) ids[i] = normal[splitmix(&seed) % (uint64_t)n_normal];
    int rc = seqs_push(s, ids, n_tokens, seq_len) ? cli_fail("profile: out of memory") : 0;
    free(normal);
    free(ids);
    return rc ? -1 : 0;
}

static void print_summary(const struct model *m, const struct routing_stats *st) {
    printf("routing of %s: %llu tokens in %llu sequences, %d experts, top-%d\n", m->name,
           (unsigned long long)st->n_tokens, (unsigned long long)st->n_sequences, st->n_expert, st->top_k);
    float skew;
    if (gguf_get_f32(m->file, "moex.synth.skew", &skew) == 0)
        printf("synthetic: skew %.3g asks for a top-10%% share of %.3f\n", skew,
               routing_zipf_top10_share(st->n_expert, st->top_k, skew));
    printf("%5s %12s %8s %8s %8s %8s %9s %9s\n", "layer", "rows", "top10%", "entropy", "H/Hmax", "next", "within8",
           "hot 1st/2nd");
    struct routing_layer_summary sum, mean;
    memset(&mean, 0, sizeof mean);
    for (int l = 0; l < st->n_layers; l++) {
        routing_stats_summarize(st, l, &sum);
        printf("%5d %12llu %8.3f %8.2f %8.3f %8.3f %9.3f %5.2f/%.2f\n", l, (unsigned long long)sum.rows, sum.top10_share,
               sum.entropy, sum.entropy_norm, sum.repeat_next, sum.repeat_window, sum.hot_own, sum.hot_other);
        mean.top10_share += sum.top10_share / st->n_layers;
        mean.entropy += sum.entropy / st->n_layers;
        mean.entropy_norm += sum.entropy_norm / st->n_layers;
        mean.repeat_next += sum.repeat_next / st->n_layers;
        mean.repeat_window += sum.repeat_window / st->n_layers;
        mean.hot_own += sum.hot_own / st->n_layers;
        mean.hot_other += sum.hot_other / st->n_layers;
    }
    printf("%5s %12s %8.3f %8.2f %8.3f %8.3f %9.3f %5.2f/%.2f\n", "mean", "", mean.top10_share, mean.entropy,
           mean.entropy_norm, mean.repeat_next, mean.repeat_window, mean.hot_own, mean.hot_other);
    printf("(top10%%: share of routed rows taken by the top %d experts; next / within8: share of a token's\n"
           " experts also chosen by the previous token / one of the previous %d; hot 1st/2nd: share of\n"
           " each half's rows taken by the first half's top %d experts)\n",
           routing_top10_count(st->n_expert), ROUTING_WINDOW, st->n_expert / 4 > 0 ? st->n_expert / 4 : 1);
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
    struct atomic_file *out_file = atomic_file_create(out);
    if (!out_file) return cli_fail("profile: %s", moex_error());
    char *text = NULL;
    size_t text_len = 0;
    if (file && cli_read_input("-f", file, &text, &text_len)) { atomic_file_discard(out_file); return 1; }
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { atomic_file_discard(out_file); free(text); return opened; }
    struct model *m = s.model;
    if (seq_len > context_n_ctx(s.ctx)) {
        if (seq_given) {
            cli_fail("profile: --seq %lld is longer than the context of %d tokens (--ctx)", (long long)seq_len,
                     context_n_ctx(s.ctx));
            free(text);
            atomic_file_discard(out_file);
            session_close(&s);
            return 2;
        }
        seq_len = context_n_ctx(s.ctx);
    }
    struct token_seqs seqs;
    memset(&seqs, 0, sizeof seqs);
    int rc = file ? seqs_from_text(m, file, text, text_len, (int)seq_len, &seqs)
                  : seqs_random(m, n_random, (uint64_t)seed, (int)seq_len, &seqs);
    free(text);
    struct routing_stats *st = NULL;
    struct packfile_identity id;
    if (rc == 0 && !(st = routing_stats_new(m->moe.n_layers, m->hp.n_expert, m->hp.n_expert_used, m->name)))
        rc = cli_fail("%s", moex_error());
    if (rc == 0 && packfile_model_identity(m->file, &id) != PACKFILE_OK) rc = cli_fail("%s", moex_error());
    if (rc == 0) {
        st->model_hash = id.hash;
        st->model_size = id.gguf_size;
    }
    if (rc == 0) {
        context_set_route_observer(s.ctx, routing_stats_observe, st);
        struct progress bar;
        bool show = !quiet;
        if (show) progress_begin(&bar, "profile", (uint64_t)seqs.n);
        int64_t done = 0;
        for (int q = 0; q < seqs.n_seqs && rc == 0; q++) {
            context_truncate(s.ctx, 0);
            routing_stats_begin_sequence(st);
            int64_t begin = seqs.starts[q], end = seqs.starts[q + 1];
            /* The half-way switch lands inside a sequence when there is only one. */
            int64_t half = seqs.n / 2;
            for (int64_t off = begin; off < end && rc == 0;) {
                int64_t n = end - off;
                if (off < half && off + n > half) n = half - off;
                routing_stats_set_phase(st, off >= half);
                if (context_eval(s.ctx, seqs.ids + off, (int)n, NULL, false)) rc = cli_fail("%s", moex_error());
                off += n;
                done += n;
                if (show) progress_update(&bar, (uint64_t)done);
            }
        }
        if (show) progress_end(&bar);
        context_set_route_observer(s.ctx, NULL, NULL);
    }
    if (rc == 0) {
        struct atomic_file *f = out_file;
        out_file = NULL;
        if (routing_stats_write_file(st, f)) rc = cli_fail("%s", moex_error());
    }
    atomic_file_discard(out_file);
    if (rc == 0 && !quiet) print_summary(m, st);
    routing_stats_free(st);
    free(seqs.ids);
    free(seqs.starts);
    if (session_close(&s)) rc = 1;
    return rc ? 1 : 0;
}
