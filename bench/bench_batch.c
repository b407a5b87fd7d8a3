/* Decode passes of several sequences batched in one context (what moex serve
 * does with its slots), on the public API: for 1, 2, 4, .. max_seqs
 * sequences, each holding a prompt of 32 tokens, `steps` decode batches of
 * one token per sequence; the best of `reps` timings of each.
 *   bench_batch MODEL [max_seqs=8] [threads=2] [steps=16] [reps=3]
 * Prints a markdown table: tokens per pass, ms per pass, aggregate tokens/s
 * and its ratio to one sequence's. */
#include "moex_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { PROMPT = 32 };

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch MODEL [max_seqs=8] [threads=2] [steps=16] [reps=3]\n");
        return 2;
    }
    int max_seqs = argc > 2 ? atoi(argv[2]) : 8, threads = argc > 3 ? atoi(argv[3]) : 2;
    int steps = argc > 4 ? atoi(argv[4]) : 16, reps = argc > 5 ? atoi(argv[5]) : 3;
    if (max_seqs < 1 || max_seqs > 256 || threads < 1 || steps < 1 || reps < 1) {
        fprintf(stderr, "bench_batch: max_seqs 1..256, threads, steps and reps >= 1\n");
        return 2;
    }
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = argv[1];
    mp.n_threads = threads;
    moex_model *m = moex_model_load(&mp);
    if (!m) { fprintf(stderr, "bench_batch: %s\n", moex_last_error()); return 1; }
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = PROMPT + steps * (reps + 1) + 8;
    moex_context *c = moex_context_new_seqs(m, &cp, max_seqs);
    int32_t *tok = malloc(sizeof *tok * (size_t)max_seqs * PROMPT), *seq = malloc(sizeof *seq * (size_t)max_seqs * PROMPT);
    if (!c || !tok || !seq) { fprintf(stderr, "bench_batch: %s\n", moex_last_error()); return 1; }
    int V = moex_model_n_vocab(m);
    printf("| tokens per pass | ms per pass | aggregate t/s | x one sequence |\n|---|---|---|---|\n");
    double one = 0;
    for (int n = 1; n <= max_seqs; n = n * 2 > max_seqs && n < max_seqs ? max_seqs : n * 2) {
        for (int s = 0; s < n; s++) { /* a fresh prompt for each sequence */
            moex_seq_truncate(c, s, 0);
            for (int i = 0; i < PROMPT; i++) { tok[s * PROMPT + i] = (s * 131 + i * 17 + 5) % V; seq[s * PROMPT + i] = s; }
        }
        if (moex_eval_batch(c, tok, seq, n * PROMPT)) { fprintf(stderr, "bench_batch: %s\n", moex_last_error()); return 1; }
        double best = 1e30;
        for (int r = 0; r <= reps; r++) { /* the first round warms up */
            double t0 = now_s();
            for (int i = 0; i < steps; i++) {
                for (int s = 0; s < n; s++) { tok[s] = (r * 977 + i * 31 + s * 7 + 3) % V; seq[s] = s; }
                if (moex_eval_batch(c, tok, seq, n)) { fprintf(stderr, "bench_batch: %s\n", moex_last_error()); return 1; }
            }
            double dt = (now_s() - t0) / steps;
            if (r > 0 && dt < best) best = dt;
        }
        if (n == 1) one = 1 / best;
        printf("| %d | %.2f | %.2f | %.2f |\n", n, best * 1e3, n / best, n / best / one);
        fflush(stdout);
        if (n == max_seqs) break;
    }
    free(tok);
    free(seq);
    moex_context_free(c);
    moex_model_free(m);
    return 0;
}
