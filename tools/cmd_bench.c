/* moex bench: prompt processing (pp) and token generation (tg) throughput,
 * shaped like llama-bench: one row per test and combination of threads and
 * batch sizes, as a markdown table, CSV, JSON or JSON lines. */
#include "cli.h"
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex bench [-m MODEL] [-p 512] [-n 128] [-pg PP,TG] [-d 0] [-r 3] [-t N] [-o md] [options]\n"
            "Measures prompt processing (ppP: P tokens as one batch from an empty\n"
            "context) and token generation (tgN: N tokens one at a time) and prints\n"
            "a llama-bench style table: t/s mean +- standard deviation over the runs.\n"
            "Lists give one row per value, and -t and -b lists one row per combination.\n\n"
            "  -p, --n-prompt LIST   prompt lengths, comma-separated; 0 = none (default 512)\n"
            "  -n, --n-gen LIST      generation lengths; 0 = none (default 128)\n"
            "  -pg PP,TG             a prompt of PP tokens then TG generated ones, timed together\n"
            "                        (t/s counts both); may be given more than once\n"
            "  -d, --n-depth LIST    tokens already in the context before each test (default 0):\n"
            "                        the test is named 'tg128 @ d512'\n"
            "  -t, --threads LIST    worker threads (default: physical cores)\n"
            "  -b, --batch-size LIST most tokens per forward pass (default: the longest test, at\n"
            "                        most 512; a list adds an n_batch column)\n"
            "      --batch LIST      the same as --batch-size\n"
            "  -r, --repetitions N   runs per test, after one warm-up (default 3)\n"
            "  -o, --output FORMAT   md (default), csv, json or jsonl (one JSON object per line)\n"
            "      --ops             also say where the time goes per op, after the table\n"
            "      --no-roofline     skip the read-bandwidth probe (about a second)\n\n"
            "With --device sim --sim rk3588,board=1 the t/s are the RK3588 board model's\n"
            "prediction (every op's modelled time: dense matmuls and attention on its\n"
            "CPU or NPU, experts as placed); the host still computes the logits.\n\n"
            "Next to each tg test: the weights read per second (bytes of weights a decoded\n"
            "token reads, times t/s), that as a share of the machine's read bandwidth\n"
            "measured before and after the tests (\"of read BW\": all threads, widest loads,\n"
            "best of several passes, a 512 MiB buffer: main memory), and the process's peak\n"
            "resident memory. A model whose decode weights fit in the CPU's last-level cache\n"
            "reads them from the cache, not from memory: its share can pass 100%% and is then\n"
            "no roofline; the table says so under it.\n\n");
    session_opts_help_with(out, &(struct session_help){ .groups = SESSION_ALL & ~SESSION_CONTEXT,
                                                        .own_threads = true });
    fprintf(out,
            "  -c, --ctx-size N    context length in tokens (default: %s)\n"
            "      --ctx N         the same as --ctx-size\n"
            "      --kv-type T     KV cache type: f16 (default) or f32\n", "the longest test");
}

static void model_label(const struct moex_model_info *m, char *out, size_t cap) {
    static const char *names[] = { [0] = "all F32", [1] = "F16", [2] = "Q4_0", [7] = "Q8_0", [15] = "Q4_K - Medium",
                                   [14] = "Q4_K - Small", [17] = "Q5_K - Medium", [18] = "Q6_K", [32] = "BF16" };
    const char *type = "?";
    if (m->file_type < sizeof names / sizeof names[0] && names[m->file_type]) type = names[m->file_type];
    if (m->n_params >= 1000000000) snprintf(out, cap, "%s %.1fB %s", m->arch, (double)m->n_params / 1e9, type);
    else snprintf(out, cap, "%s %.0fM %s", m->arch, (double)m->n_params / 1e6, type);
}

/* Whether the run's device offloads anything (not "none"). */
static bool counters_offload(const struct moex_counters *c) {
    struct moex_device_desc d;
    return moex_device_describe(c->device, &d) == 0 && d.offloads;
}

static double time_s(void) { return (double)cli_time_ns() * 1e-9; }

/* Peak resident memory since the last reset_peak_rss(): the kernel's
 * VmHWM, or getrusage's (never reset) where /proc is not there. */
static double peak_rss_gib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    struct rusage ru;
    if (kib < 0 && !getrusage(RUSAGE_SELF, &ru)) kib = ru.ru_maxrss;
    return kib < 0 ? 0 : (double)kib / (1024.0 * 1024);
}

/* The bandwidth probe's buffer is not the model's: forget it in the peak. */
static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

/* Two lines per test: the kinds of op only some architectures have (when
 * this one has any), then those every one has, "other" last. */
static void print_ops(FILE *out, const char *test, const struct moex_op_times *t, int runs) {
    double total = 0;
    for (int k = 0; k < t->n; k++) total += (double)t->op[k].ns;
    if (total <= 0) return;
    for (int common = 0; common < 2; common++) {
        int shown = 0;
        for (int k = 0; k < t->n; k++) {
            const struct moex_op_time *o = &t->op[k];
            if (o->common != (common == 1) || (!common && o->ns == 0)) continue;
            if (!shown) fprintf(out, "%s per run: ", test);
            fprintf(out, "%s%s %.1f ms", shown++ ? ", " : "", o->name, o->ns / 1e6 / runs);
            if (k < t->n - 1) fprintf(out, " (%.0f%%)", 100 * o->ns / total); /* "other" has no share */
        }
        if (shown) fputc('\n', out);
    }
}

enum bench_format { FORMAT_MD, FORMAT_CSV, FORMAT_JSON, FORMAT_JSONL };

/* One test: a prompt of pp tokens, then tg generated ones, after depth tokens. */
struct bench_test {
    int pp, tg, depth;
};

/* One row of the output. */
struct bench_row {
    const char *model, *backend;
    double size_bytes;
    uint64_t n_params;
    int threads, n_batch;
    struct bench_test test;
    char name[64];
    double mean, sd;          /* t/s */
    double weights_gbps;      /* tg only; < 0 otherwise */
    double bw_share;          /* of the measured read bandwidth; < 0 when not measured */
    double rss_gib;
    const double *samples;    /* (reps) */
    int reps;
};

struct bench_opts {
    struct bench_test *tests;
    int n_tests;
    int64_t *threads, *batches;
    int n_threads, n_batches;  /* 0: the session's default */
    int64_t reps;
    bool ops, roofline;
    enum bench_format format;
};

static void test_name(const struct bench_test *t, char *out, size_t cap) {
    int n = t->tg == 0 ? snprintf(out, cap, "pp%d", t->pp)
          : t->pp == 0 ? snprintf(out, cap, "tg%d", t->tg)
                       : snprintf(out, cap, "pp%d+tg%d", t->pp, t->tg);
    if (t->depth > 0 && n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, " @ d%d", t->depth);
}

/* A string as a JSON or CSV field (the model and backend names are plain, but not promised so). */
static void put_quoted(FILE *out, const char *s, bool json) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputs(json ? "\\\"" : "\"\"", out);
        else if (json && *s == '\\') fputs("\\\\", out);
        else if (json && (unsigned char)*s < 0x20) fprintf(out, "\\u%04x", *s);
        else fputc(*s, out);
    }
    fputc('"', out);
}

static void print_header(enum bench_format f, bool batch_column) {
    if (f == FORMAT_MD) {
        printf("\n| model | size | params | backend | threads |%s test | t/s | weights GB/s | of read BW | peak RSS |\n",
               batch_column ? " n_batch |" : "");
        printf("| ----- | ---: | -----: | ------- | ------: |%s ---: | --: | ---: | ---: | ---: |\n",
               batch_column ? " ------: |" : "");
    } else if (f == FORMAT_CSV) {
        printf("model_type,model_size,model_n_params,backend,n_threads,n_batch,n_prompt,n_gen,n_depth,test,"
               "avg_ts,stddev_ts,weights_gbps,read_bw_share,peak_rss_gib\n");
    } else if (f == FORMAT_JSON) {
        printf("[\n");
    }
}

static void print_row(enum bench_format f, const struct bench_row *r, bool batch_column, bool first) {
    double mib = r->size_bytes / (1024.0 * 1024);
    if (f == FORMAT_MD) {
        char gbps[32] = "-", share[32] = "-", batch[32] = "";
        if (r->weights_gbps >= 0) snprintf(gbps, sizeof gbps, "%.1f", r->weights_gbps);
        if (r->bw_share >= 0) snprintf(share, sizeof share, "%.0f%%", 100 * r->bw_share);
        if (batch_column) snprintf(batch, sizeof batch, " %d |", r->n_batch);
        printf("| %s | %.2f %s | %.2f %s | %s | %d |%s %s | %.2f ± %.2f | %s | %s | %.2f GiB |\n", r->model,
               mib >= 1024 ? mib / 1024 : mib, mib >= 1024 ? "GiB" : "MiB",
               r->n_params >= 1000000000 ? r->n_params / 1e9 : r->n_params / 1e6, r->n_params >= 1000000000 ? "B" : "M",
               r->backend, r->threads, batch, r->name, r->mean, r->sd, gbps, share, r->rss_gib);
    } else if (f == FORMAT_CSV) {
        put_quoted(stdout, r->model, false);
        printf(",%.0f,%llu,", r->size_bytes, (unsigned long long)r->n_params);
        put_quoted(stdout, r->backend, false);
        printf(",%d,%d,%d,%d,%d,\"%s\",%.6f,%.6f,", r->threads, r->n_batch, r->test.pp, r->test.tg, r->test.depth,
               r->name, r->mean, r->sd);
        if (r->weights_gbps >= 0) printf("%.3f", r->weights_gbps);
        putchar(',');
        if (r->bw_share >= 0) printf("%.4f", r->bw_share);
        printf(",%.4f\n", r->rss_gib);
    } else {
        bool lines = f == FORMAT_JSONL;
        printf("%s{%s\"model_type\": ", lines || first ? "" : ",\n", lines ? "" : "\n  ");
        put_quoted(stdout, r->model, true);
        printf(", \"model_size\": %.0f, \"model_n_params\": %llu, \"backend\": ", r->size_bytes,
               (unsigned long long)r->n_params);
        put_quoted(stdout, r->backend, true);
        printf(", \"n_threads\": %d, \"n_batch\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"test\": \"%s\", "
               "\"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [", r->threads, r->n_batch, r->test.pp,
               r->test.tg, r->test.depth, r->name, r->mean, r->sd);
        for (int i = 0; i < r->reps; i++) printf("%s%.6f", i ? ", " : "", r->samples[i]);
        printf("], \"weights_gbps\": ");
        if (r->weights_gbps >= 0) printf("%.3f", r->weights_gbps); else printf("null");
        printf(", \"read_bw_share\": ");
        if (r->bw_share >= 0) printf("%.4f", r->bw_share); else printf("null");
        printf(", \"peak_rss_gib\": %.4f%s}%s", r->rss_gib, lines ? "" : "\n", lines ? "\n" : "");
    }
    fflush(stdout);
}

/* The CPU's last-level cache in bytes, 0 when unknown. */
static long llc_bytes(void) {
    long size = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return size > 0 ? size : 0;
}

/* Times one test reps times (after a warm-up unless --no-warmup) into rate[];
 * with a modelled device or the board model, the modelled times. ops: the
 * board's breakdown per run goes to ops_out. 0, or -1 after printing why. */
static int measure(struct session *s, const struct bench_test *t, const int32_t *tokens, int reps, bool warmup,
                   double *rate, double *board_dense_out, double *board_experts_out) {
    bool board = moex_context_has_board(s->mc), modelled = moex_context_device_modelled(s->mc) || board;
    double board_dense = 0, board_experts = 0;
    int rc = 0;
    for (int r = warmup ? -1 : 0; r < reps && !rc; r++) { /* r = -1: warm-up */
        moex_truncate(s->mc, 0);
        if (t->depth > 0 && (rc = moex_eval(s->mc, tokens, t->depth))) break;
        if (r == 0) moex_context_reset_op_times(s->mc);
        struct moex_phase_counters before[2], after[2];
        int64_t simulated = 0;
        for (int ph = 0; ph < 2; ph++) {
            moex_context_phase_counters(s->mc, (enum moex_phase)ph, &before[ph]);
            simulated -= moex_context_simulated_ns(s->mc, (enum moex_phase)ph);
        }
        const int32_t *at = tokens + t->depth;
        double t0 = time_s();
        if (t->pp > 0) rc = moex_eval(s->mc, at, t->pp);
        for (int i = 0; i < t->tg && !rc; i++) rc = moex_eval(s->mc, &at[t->pp + i], 1);
        double dt = time_s() - t0;
        /* With a modelled device, the host-simulated time of its work
         * (experts and dense matmuls) is replaced by the modelled one. */
        double experts = 0;
        for (int ph = 0; ph < 2; ph++) {
            moex_context_phase_counters(s->mc, (enum moex_phase)ph, &after[ph]);
            simulated += moex_context_simulated_ns(s->mc, (enum moex_phase)ph);
            experts += (double)(after[ph].modelled_ns - before[ph].modelled_ns);
        }
        double mdt = dt - (double)simulated * 1e-9;
        if (board && !rc) {
            /* every op modelled: the dense part from the shapes, the experts per layer */
            double dense = 0, ns = t->pp > 0 ? moex_context_board_dense_ns(s->mc, t->pp, t->depth) : 0;
            if (ns < 0) rc = -1;
            dense += ns;
            for (int i = 0; i < t->tg && !rc; i++) {
                ns = moex_context_board_dense_ns(s->mc, 1, t->depth + t->pp + i);
                if (ns < 0) rc = -1;
                else dense += ns;
            }
            mdt = (dense + experts) * 1e-9;
            if (r >= 0) { board_dense += dense; board_experts += experts; }
        }
        if (r >= 0) rate[r] = (t->pp + t->tg) / (modelled ? mdt : dt);
    }
    if (rc) return cli_fail("bench: %s", moex_last_error()), -1;
    *board_dense_out = board_dense;
    *board_experts_out = board_experts;
    return 0;
}

/* The tests of one session (threads, batch size): rows printed as they come,
 * --ops after them (kept in ops_out until the table is whole). */
static int run_tests(struct session *s, const struct session_opts *so, const struct bench_opts *b,
                     const int32_t *tokens, const struct moex_bandwidth *bw, bool *first_row, FILE *ops_out) {
    struct moex_model_info info;
    moex_model_get_info(s->mm, &info);
    char label[128];
    model_label(&info, label, sizeof label);
    bool board = moex_context_has_board(s->mc);
    int reps = (int)b->reps;
    double *rate = malloc(sizeof *rate * (size_t)reps);
    if (!rate) return cli_fail("out of memory"), -1;
    int rc = 0;
    for (int ti = 0; ti < b->n_tests && !rc; ti++) {
        const struct bench_test *t = &b->tests[ti];
        double board_dense, board_experts;
        if ((rc = measure(s, t, tokens, reps, !so->no_warmup, rate, &board_dense, &board_experts))) break;
        bool modelled = moex_context_device_modelled(s->mc) || board;
        struct moex_counters counters;
        moex_context_counters(s->mc, &counters);
        struct bench_row row = { .model = label, .size_bytes = (double)info.weight_bytes, .n_params = info.n_params,
                                 .threads = info.n_threads, .n_batch = so->n_batch, .test = *t, .samples = rate,
                                 .reps = reps, .weights_gbps = -1, .bw_share = -1 };
        for (int r = 0; r < reps; r++) row.mean += rate[r] / reps;
        double var = 0;
        for (int r = 0; r < reps; r++) var += (rate[r] - row.mean) * (rate[r] - row.mean);
        row.sd = reps > 1 ? sqrt(var / (reps - 1)) : 0;
        test_name(t, row.name, sizeof row.name);
        char backend[48];
        if (board) snprintf(backend, sizeof backend, "RK3588 board (modelled)");
        else if (!counters_offload(&counters)) snprintf(backend, sizeof backend, "CPU");
        else snprintf(backend, sizeof backend, "CPU+%s%s", counters.device, modelled ? " (modelled)" : "");
        row.backend = backend;
        if (t->pp == 0) { /* decode reads the weights once per token */
            row.weights_gbps = (double)info.decode_bytes * row.mean / 1e9;
            if (b->roofline && bw->best_gbps > 0) row.bw_share = row.weights_gbps / bw->best_gbps;
        }
        row.rss_gib = peak_rss_gib();
        print_row(b->format, &row, b->n_batches > 0, *first_row);
        *first_row = false;
        if (b->ops && board) {
            uint64_t hits, misses;
            moex_context_board_expert_uses(s->mc, &hits, &misses);
            fprintf(ops_out, "%s per run on the board: dense matmuls, attention and lm head %.1f ms, experts %.1f ms",
                    row.name, board_dense / 1e6 / reps, board_experts / 1e6 / reps);
            if (hits + misses)
                fprintf(ops_out, "; legacy expert uses so far: %.1f%% on the NPU", 100.0 * hits / (double)(hits + misses));
            fputc('\n', ops_out);
        }
        if (b->ops) {
            struct moex_op_times times;
            moex_context_op_times(s->mc, &times);
            print_ops(ops_out, row.name, &times, reps);
            /* per eval call: a batch for pp, a token for tg */
            int evals = (t->pp > 0) + t->tg;
            double per_eval = (double)times.barriers / reps / (evals ? evals : 1);
            fprintf(ops_out, "%s barriers: %.0f per %s, %.1f per layer\n", row.name, per_eval,
                    t->pp ? "batch" : "token", per_eval / (info.n_layers > 0 ? info.n_layers : 1));
        }
    }
    free(rate);
    return rc;
}

/* -pg PP,TG: one more test. */
static int add_pg(const char *v, struct bench_test **tests, int *n) {
    int64_t *pair = NULL;
    int count = cli_parse_int_list("-pg", v, 0, 1 << 20, &pair);
    if (count < 0) return -1;
    if (count != 2 || pair[0] <= 0 || pair[1] <= 0) {
        free(pair);
        return cli_fail("-pg: invalid value '%s' (expected PP,TG: two positive token counts)", v), -1;
    }
    struct bench_test *g = realloc(*tests, sizeof *g * (size_t)(*n + 1));
    if (!g) { free(pair); return cli_fail("out of memory"), -1; }
    g[(*n)++] = (struct bench_test){ (int)pair[0], (int)pair[1], 0 };
    *tests = g;
    free(pair);
    return 0;
}

/* The tests in llama-bench's order: every pp, every tg, every pg, each at every depth. */
static int make_tests(struct bench_opts *b, const char *pp_list, const char *tg_list, const char *depth_list,
                      struct bench_test *pg, int n_pg) {
    int64_t *pp = NULL, *tg = NULL, *depth = NULL;
    int n_pp = cli_parse_int_list("--n-prompt", pp_list, 0, 1 << 20, &pp);
    int n_tg = n_pp < 0 ? -1 : cli_parse_int_list("--n-gen", tg_list, 0, 1 << 20, &tg);
    int n_depth = n_tg < 0 ? -1 : cli_parse_int_list("--n-depth", depth_list, 0, 1 << 20, &depth);
    int rc = n_depth < 0 ? -1 : 0;
    if (!rc && !(b->tests = malloc(sizeof *b->tests * (size_t)(n_pp + n_tg + n_pg) * (size_t)n_depth)))
        rc = cli_fail("out of memory");
    for (int d = 0; !rc && d < n_depth; d++) {
        for (int i = 0; i < n_pp; i++)
            if (pp[i] > 0) b->tests[b->n_tests++] = (struct bench_test){ (int)pp[i], 0, (int)depth[d] };
        for (int i = 0; i < n_tg; i++)
            if (tg[i] > 0) b->tests[b->n_tests++] = (struct bench_test){ 0, (int)tg[i], (int)depth[d] };
        for (int i = 0; i < n_pg; i++)
            b->tests[b->n_tests++] = (struct bench_test){ pg[i].pp, pg[i].tg, (int)depth[d] };
    }
    if (!rc && b->n_tests == 0)
        rc = cli_fail("bench: --n-prompt %s and --n-gen %s leave nothing to measure", pp_list, tg_list);
    free(pp);
    free(tg);
    free(depth);
    return rc ? -1 : 0;
}

int cmd_bench(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    const char *pp_list = "512", *tg_list = "128", *depth_list = "0", *threads_list = NULL, *batch_list = NULL;
    struct bench_opts b = { .reps = 3, .roofline = true, .format = FORMAT_MD };
    struct bench_test *pg = NULL;
    int n_pg = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        /* -t and -b take lists here: before the shared parser, which takes one value */
        if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!(threads_list = cli_value(argc, argv, &i))) goto out; continue; }
        if (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "--batch")) {
            if (!(batch_list = cli_value(argc, argv, &i))) goto out;
            continue;
        }
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) goto out;
        if (r) continue;
        if (cli_is_help(a)) { help(stdout); rc = 0; goto out; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) { if (!(pp_list = cli_value(argc, argv, &i))) goto out; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) { if (!(tg_list = cli_value(argc, argv, &i))) goto out; }
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) { if (!(depth_list = cli_value(argc, argv, &i))) goto out; }
        else if (!strcmp(a, "-pg")) { if (!(v = cli_value(argc, argv, &i)) || add_pg(v, &pg, &n_pg)) goto out; }
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--repetitions", v, 1, 1000, &b.reps)) goto out;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_value(argc, argv, &i))) goto out;
            if (!strcmp(v, "md")) b.format = FORMAT_MD;
            else if (!strcmp(v, "csv")) b.format = FORMAT_CSV;
            else if (!strcmp(v, "json")) b.format = FORMAT_JSON;
            else if (!strcmp(v, "jsonl")) b.format = FORMAT_JSONL;
            else { cli_fail("--output: invalid value '%s' (expected md, csv, json or jsonl)", v); goto out; }
        } else if (!strcmp(a, "--ops")) b.ops = true;
        else if (!strcmp(a, "--no-roofline")) b.roofline = false;
        else { rc = cli_usage("bench", "unknown option '%s'", a); goto out; }
    }
    if (session_opts_finish(&so)) goto out;
    if (threads_list && (b.n_threads = cli_parse_int_list("--threads", threads_list, 1, 256, &b.threads)) < 0) goto out;
    if (batch_list && (b.n_batches = cli_parse_int_list("--batch-size", batch_list, 1, 1 << 16, &b.batches)) < 0) goto out;
    if (make_tests(&b, pp_list, tg_list, depth_list, pg, n_pg)) goto out;
    int64_t longest = 1;
    for (int i = 0; i < b.n_tests; i++) {
        const struct bench_test *t = &b.tests[i];
        int64_t n = t->depth + t->pp + t->tg + (t->pp == 0); /* a tg test's last token's logits need a place */
        if (n > longest) longest = n;
    }
    if (so.n_ctx && so.n_ctx < longest) {
        cli_fail("bench: --ctx %d is shorter than the longest test (%lld tokens)", so.n_ctx, (long long)longest);
        goto out;
    }
    if (!so.n_ctx) so.n_ctx = (int)longest;
    rc = 1;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)longest);
    FILE *ops_out = NULL;
    char *ops_text = NULL;
    size_t ops_len = 0;
    if (!tokens || (b.ops && !(ops_out = open_memstream(&ops_text, &ops_len)))) { cli_fail("out of memory"); goto done; }
    /* Notes before the table go where they do not break the format. */
    FILE *notes = b.format == FORMAT_MD ? stdout : stderr;
    bool first_row = true;
    struct moex_bandwidth bw = { 0 };
    uint64_t decode_bytes = 0;
    struct session s = { 0 };   /* the last combination's stays open for the bandwidth after the tests */
    int n_t = b.n_threads ? b.n_threads : 1, n_b = b.n_batches ? b.n_batches : 1;
    for (int ti = 0; ti < n_t; ti++) {
        for (int bi = 0; bi < n_b; bi++) {
            struct session_opts o = so;
            if (b.n_threads) o.threads = (int)b.threads[ti];
            if (b.n_batches) o.n_batch = (int)b.batches[bi];
            if (!o.n_batch) o.n_batch = (int)(longest < 512 ? longest : 512);
            bool first = !s.mm && first_row;
            if (s.mm && session_close(&s)) goto done;
            int opened = session_open(&s, &o);
            if (opened) { rc = opened; goto done; }
            if (first) {
                int n_vocab = moex_model_n_vocab(s.mm);
                uint64_t rng = 42;
                for (int64_t i = 0; i < longest; i++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    tokens[i] = (int32_t)((rng >> 33) % (uint64_t)n_vocab);
                }
                struct moex_model_info info;
                moex_model_get_info(s.mm, &info);
                decode_bytes = info.decode_bytes;
                if (b.roofline && moex_measure_bandwidth(s.mm, 8, &bw)) {
                    cli_fail("bench: %s", moex_last_error());
                    b.roofline = false;
                }
                /* what the run uses (the kernels and their cap), then what the CPU has */
                const char *isa_cap = so.isa ? so.isa : getenv("MOEX_ISA");
                char cap[96] = "";
                if (isa_cap && *isa_cap)
                    snprintf(cap, sizeof cap, " (capped by %s %.40s)", so.isa ? "--isa" : "MOEX_ISA", isa_cap);
                fprintf(notes, "cpu: kernels %s%s of %s, %d threads; decode reads %.3f GB of weights per token\n",
                        moex_isa(), cap, moex_cpu_features(), info.n_threads, (double)decode_bytes / 1e9);
                if (b.roofline)
                    fprintf(notes, "read bandwidth before the tests: %.1f GB/s (best of %d passes, %s loads, %d threads; "
                            "worst %.1f)\n", bw.best_gbps, bw.tries, bw.loads, bw.threads, bw.worst_gbps);
                fflush(notes);
                print_header(b.format, b.n_batches > 0);
            }
            reset_peak_rss();
            if (run_tests(&s, &o, &b, tokens, &bw, &first_row, ops_out)) goto done;
        }
    }
    if (b.format == FORMAT_JSON) printf("\n]\n");
    if (b.format == FORMAT_MD && b.roofline) {
        long llc = llc_bytes();
        if (llc > 0 && decode_bytes <= (uint64_t)llc)
            printf("\nof read BW: the decode weights (%.1f MiB) fit in the last-level cache (%.1f MiB): tg reads them "
                   "from the cache, so this share of main memory's bandwidth is no roofline\n",
                   decode_bytes / 1048576.0, llc / 1048576.0);
    }
    struct moex_bandwidth after;
    if (b.roofline && !moex_measure_bandwidth(s.mm, 8, &after))
        fprintf(notes, "\nread bandwidth after the tests: %.1f GB/s (worst %.1f); best of both %.1f GB/s\n",
                after.best_gbps, after.worst_gbps, after.best_gbps > bw.best_gbps ? after.best_gbps : bw.best_gbps);
    rc = 0;
done:
    if (ops_out) {
        fclose(ops_out);
        if (rc == 0 && ops_len) { fflush(stdout); fputs(ops_text, stderr); }
        free(ops_text);
    }
    if (s.mm && session_close(&s) && rc == 0) rc = 1;
    free(tokens);
out:
    free(pg);
    free(b.tests);
    free(b.threads);
    free(b.batches);
    return rc;
}
