/* moex bench: prompt processing (pp) and token generation (tg) throughput,
 * printed as a markdown table shaped like llama-bench's. */
#include "cli.h"
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex bench [-m MODEL] [-p 512] [-n 128] [-r 3] [-t N] [options]\n"
            "Measures prompt processing (ppP: P tokens as one batch from an empty\n"
            "context) and token generation (tgN: N tokens one at a time) and prints\n"
            "a llama-bench style table: t/s mean +- standard deviation over the runs.\n\n"
            "  -p, --n-prompt LIST   prompt lengths, comma-separated; 0 = none (default 512)\n"
            "  -n, --n-gen LIST      generation lengths; 0 = none (default 128)\n"
            "  -r, --repetitions N   runs per test, after one warm-up (default 3)\n"
            "      --ops             also print where the time goes per op\n"
            "      --no-roofline     skip the read-bandwidth probe (about a second)\n\n"
            "With --device sim --sim rk3588,board=1 the t/s are the RK3588 board model's\n"
            "prediction (every op's modelled time: dense matmuls and attention on its\n"
            "CPU or NPU, experts as placed); the host still computes the logits.\n\n"
            "Next to each test: the weights read per second (tg: bytes of weights a\n"
            "decoded token reads, times t/s), that as a share of the machine's read\n"
            "bandwidth measured before and after the tests (all threads, widest loads,\n"
            "best of several passes), and the process's peak resident memory.\n");
    session_opts_help_with(out, &(struct session_help){ .groups = SESSION_ALL, .ctx_default = "the longest test",
                                                        .batch_default = "the longest test, at most 512" });
}

static void model_label(const struct moex_model_info *m, char *out, size_t cap) {
    static const char *names[] = { [0] = "all F32", [1] = "F16", [2] = "Q4_0", [7] = "Q8_0", [15] = "Q4_K - Medium",
                                   [14] = "Q4_K - Small", [17] = "Q5_K - Medium", [18] = "Q6_K", [32] = "BF16" };
    const char *type = "?";
    if (m->file_type < sizeof names / sizeof names[0] && names[m->file_type]) type = names[m->file_type];
    if (m->n_params >= 1000000000) snprintf(out, cap, "%s %.1fB %s", m->arch, (double)m->n_params / 1e9, type);
    else snprintf(out, cap, "%s %.0fM %s", m->arch, (double)m->n_params / 1e6, type);
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

static void print_ops(const char *test, const struct moex_op_times *t, int runs) {
    double total = (double)(t->attn_matmul + t->attention + t->router + t->experts + t->lm_head + t->other +
                            t->shortconv + t->dense_ffn + t->delta_net);
    if (total <= 0) return;
    if (t->shortconv || t->dense_ffn)
        fprintf(stderr, "%s per run: short conv %.1f ms (%.0f%%), dense ffn %.1f ms (%.0f%%)\n", test,
                t->shortconv / 1e6 / runs, 100 * t->shortconv / total, t->dense_ffn / 1e6 / runs,
                100 * t->dense_ffn / total);
    if (t->delta_net)
        fprintf(stderr, "%s per run: delta net %.1f ms (%.0f%%)\n", test, t->delta_net / 1e6 / runs,
                100 * t->delta_net / total);
    fprintf(stderr, "%s per run: attention matmuls %.1f ms (%.0f%%), attention %.1f ms (%.0f%%), router %.1f ms "
            "(%.0f%%), experts %.1f ms (%.0f%%), lm head %.1f ms (%.0f%%), other %.1f ms\n", test,
            t->attn_matmul / 1e6 / runs, 100 * t->attn_matmul / total, t->attention / 1e6 / runs,
            100 * t->attention / total, t->router / 1e6 / runs, 100 * t->router / total,
            t->experts / 1e6 / runs, 100 * t->experts / total, t->lm_head / 1e6 / runs,
            100 * t->lm_head / total, t->other / 1e6 / runs);
}

int cmd_bench(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    const char *pp_list = "512", *tg_list = "128";
    int64_t reps = 3;
    bool ops = false, roofline = true;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v;
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) { if (!(pp_list = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) { if (!(tg_list = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--repetitions", v, 1, 1000, &reps)) return 2;
        } else if (!strcmp(a, "--ops")) ops = true;
        else if (!strcmp(a, "--no-roofline")) roofline = false;
        else return cli_usage("bench", "unknown option '%s'", a);
    }
    if (session_opts_finish(&so)) return 2;
    int64_t *pp = NULL, *tg = NULL;
    int n_pp = cli_parse_int_list("--n-prompt", pp_list, 0, 1 << 20, &pp);
    int n_tg = n_pp < 0 ? -1 : cli_parse_int_list("--n-gen", tg_list, 0, 1 << 20, &tg);
    if (n_pp < 0 || n_tg < 0) { free(pp); free(tg); return 2; }
    int64_t longest = 1;
    for (int i = 0; i < n_pp; i++) if (pp[i] > longest) longest = pp[i];
    for (int i = 0; i < n_tg; i++) if (tg[i] + 1 > longest) longest = tg[i] + 1;
    bool any = false;
    for (int i = 0; i < n_pp; i++) any |= pp[i] > 0;
    for (int i = 0; i < n_tg; i++) any |= tg[i] > 0;
    int bad = 0;
    if (!any) bad = cli_fail("bench: --n-prompt %s and --n-gen %s leave nothing to measure", pp_list, tg_list);
    else if (so.n_ctx && so.n_ctx < longest)
        bad = cli_fail("bench: --ctx %d is shorter than the longest test (%lld tokens)", so.n_ctx, (long long)longest);
    if (bad) { free(pp); free(tg); return 2; }
    if (!so.n_ctx) so.n_ctx = (int)longest;
    if (!so.n_batch) so.n_batch = (int)(longest < 512 ? longest : 512);
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { free(pp); free(tg); return opened; }

    struct moex_model_info info;
    moex_model_get_info(s.mm, &info);
    char label[128];
    model_label(&info, label, sizeof label);
    int n_vocab = moex_model_n_vocab(s.mm);
    int32_t *tokens = malloc(sizeof *tokens * (size_t)longest);
    uint64_t rng = 42;
    for (int64_t i = 0; i < longest; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((rng >> 33) % (uint64_t)n_vocab);
    }
    uint64_t tok_bytes = info.decode_bytes;
    bool board = moex_context_has_board(s.mc);
    struct moex_bandwidth bw = { 0 };
    if (roofline && moex_measure_bandwidth(s.mm, 8, &bw)) {
        cli_fail("bench: %s", moex_last_error());
        roofline = false;
    }
    reset_peak_rss();
    /* what the run uses (the kernels and their cap), then what the CPU has */
    const char *isa_cap = so.isa ? so.isa : getenv("MOEX_ISA");
    char cap[96] = "";
    if (isa_cap && *isa_cap)
        snprintf(cap, sizeof cap, " (capped by %s %.40s)", so.isa ? "--isa" : "MOEX_ISA", isa_cap);
    printf("cpu: kernels %s%s of %s, %d threads; decode reads %.3f GB of weights per token\n",
           moex_isa(), cap, moex_cpu_features(), info.n_threads, (double)tok_bytes / 1e9);
    if (roofline)
        printf("read bandwidth before the tests: %.1f GB/s (best of %d passes, %s loads, %d threads; worst %.1f)\n",
               bw.best_gbps, bw.tries, bw.loads, bw.threads, bw.worst_gbps);
    printf("\n| model | size | params | backend | threads | test | t/s | weights GB/s | of read BW | peak RSS |\n");
    printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: | ---: | ---: | ---: |\n");
    fflush(stdout);
    int rc = 0;
    for (int kind = 0; kind < 2 && !rc; kind++) {
        int n_tests = kind == 0 ? n_pp : n_tg;
        for (int ti = 0; ti < n_tests && !rc; ti++) {
            int n = (int)(kind == 0 ? pp[ti] : tg[ti]);
            if (n <= 0) continue;
            double *rate = malloc(sizeof(double) * (size_t)(reps + 1));
            double *modelled_rate = malloc(sizeof(double) * (size_t)(reps + 1));
            enum moex_phase phase = kind == 0 ? MOEX_PHASE_PREFILL : MOEX_PHASE_DECODE;
            double board_dense = 0, board_experts = 0; /* the measured runs' modelled ns */
            for (int r = so.no_warmup ? 0 : -1; r < reps && !rc; r++) { /* r = -1: warm-up */
                moex_truncate(s.mc, 0);
                if (r == 0) moex_context_reset_op_times(s.mc);
                struct moex_phase_counters before, pc;
                moex_context_phase_counters(s.mc, phase, &before);
                int64_t simulated = moex_context_simulated_ns(s.mc, phase);
                double t0 = time_s();
                if (kind == 0) {
                    rc = moex_eval(s.mc, tokens, n);
                } else {
                    for (int i = 0; i < n && !rc; i++) rc = moex_eval(s.mc, &tokens[i], 1);
                }
                double dt = time_s() - t0;
                /* With a modelled device, the host-simulated time of its work
                 * (experts and dense matmuls) is replaced by the modelled one. */
                moex_context_phase_counters(s.mc, phase, &pc);
                simulated = moex_context_simulated_ns(s.mc, phase) - simulated;
                double mdt = dt - (double)simulated * 1e-9;
                if (board) {
                    /* every op modelled: the dense part from the shapes, the experts per layer */
                    double dense = 0, experts = (double)(pc.modelled_ns - before.modelled_ns);
                    for (int i = 0; i < (kind == 0 ? 1 : n) && !rc; i++) {
                        double ns = moex_context_board_dense_ns(s.mc, kind == 0 ? n : 1, kind == 0 ? 0 : i);
                        if (ns < 0) rc = -1;
                        else dense += ns;
                    }
                    mdt = (dense + experts) * 1e-9;
                    if (r >= 0) { board_dense += dense; board_experts += experts; }
                }
                if (r >= 0) { rate[r] = n / dt; modelled_rate[r] = n / mdt; }
            }
            if (rc) { cli_fail("bench: %s", moex_last_error()); free(rate); free(modelled_rate); break; }
            bool modelled = moex_context_device_modelled(s.mc) || board;
            struct moex_counters counters;
            moex_context_counters(s.mc, &counters);
            double mean = 0, var = 0;
            for (int r = 0; r < reps; r++) mean += (modelled ? modelled_rate : rate)[r];
            mean /= (double)reps;
            for (int r = 0; r < reps; r++) var += ((modelled ? modelled_rate : rate)[r] - mean) * ((modelled ? modelled_rate : rate)[r] - mean);
            double sd = reps > 1 ? sqrt(var / (double)(reps - 1)) : 0;
            char test[32];
            snprintf(test, sizeof test, "%s%d", kind == 0 ? "pp" : "tg", n);
            char backend[48];
            if (board) snprintf(backend, sizeof backend, "RK3588 board (modelled)");
            else if (!strcmp(counters.device, "none")) snprintf(backend, sizeof backend, "CPU");
            else snprintf(backend, sizeof backend, "CPU+%s%s", counters.device, modelled ? " (modelled)" : "");
            double gib = (double)info.weight_bytes / (1024.0 * 1024 * 1024);
            char gbps[32] = "-", share[32] = "-";
            if (kind == 1) {
                /* decode reads the weights once per token */
                snprintf(gbps, sizeof gbps, "%.1f", (double)tok_bytes * mean / 1e9);
                if (roofline && bw.best_gbps > 0)
                    snprintf(share, sizeof share, "%.0f%%", 100 * (double)tok_bytes * mean / 1e9 / bw.best_gbps);
            }
            printf("| %s | %.2f %s | %.2f %s | %s | %d | %s | %.2f ± %.2f | %s | %s | %.2f GiB |\n", label,
                   gib >= 1 ? gib : gib * 1024, gib >= 1 ? "GiB" : "MiB",
                   info.n_params >= 1000000000 ? info.n_params / 1e9 : info.n_params / 1e6,
                   info.n_params >= 1000000000 ? "B" : "M", backend,
                   info.n_threads, test, mean, sd, gbps, share, peak_rss_gib());
            fflush(stdout);
            if (ops && board) {
                uint64_t hits, misses;
                moex_context_board_expert_uses(s.mc, &hits, &misses);
                fprintf(stderr, "%s per run on the board: dense matmuls, attention and lm head %.1f ms, experts %.1f ms",
                        test, board_dense / 1e6 / reps, board_experts / 1e6 / reps);
                if (hits + misses)
                    fprintf(stderr, "; legacy expert uses so far: %.1f%% on the NPU", 100.0 * hits / (double)(hits + misses));
                fputc('\n', stderr);
            }
            if (ops) {
                struct moex_op_times times;
                moex_context_op_times(s.mc, &times);
                print_ops(test, &times, (int)reps);
                /* per eval call: a batch for pp, a token for tg */
                double per_eval = (double)times.barriers / (double)reps / (kind ? n : 1);
                fprintf(stderr, "%s barriers: %.0f per %s, %.1f per layer\n", test, per_eval, kind ? "token" : "batch",
                        per_eval / (info.n_layers > 0 ? info.n_layers : 1));
            }
            free(rate);
            free(modelled_rate);
        }
    }
    struct moex_bandwidth after;
    if (!rc && roofline && !moex_measure_bandwidth(s.mm, 8, &after)) {
        printf("\nread bandwidth after the tests: %.1f GB/s (worst %.1f); best of both %.1f GB/s\n",
               after.best_gbps, after.worst_gbps, after.best_gbps > bw.best_gbps ? after.best_gbps : bw.best_gbps);
    }
    free(tokens);
    free(pp);
    free(tg);
    if (session_close(&s)) rc = 1;
    return rc ? 1 : 0;
}
