/* moex perplexity: the perplexity of a text, chunked and scored as
 * llama.cpp's llama-perplexity does, and the KL divergence of a run against
 * a saved reference run (docs/quality.md describes the file and the figures).
 *
 * The text is tokenized whole (BOS first when the model asks for one,
 * special-token text kept as text), cut into n_chunk = tokens / n_ctx
 * chunks of n_ctx tokens; each chunk is evaluated from an empty context with
 * its first token replaced by BOS when the model asks for one, and only the
 * second half is scored: the logits of positions n_ctx/2 .. n_ctx-2 against
 * the tokens that follow them, n_ctx - 1 - n_ctx/2 predictions per chunk. */
#include "cli.h"
#include "kl_base.h"
#include "outputs.h"
#include "session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CTX 512
#define DEFAULT_TOP 128

static void help(FILE *out) {
    fprintf(out,
            "usage: moex perplexity [-m MODEL] [-f FILE] [-c N] [--chunks N] [options]\n"
            "       moex perplexity [-m MODEL] --kl-divergence-base FILE [-f FILE] ...   save a reference run\n"
            "       moex perplexity [-m MODEL] --kl-divergence-base FILE --kl-divergence  compare against it\n"
            "Perplexity of a text as llama-perplexity computes it: the text is tokenized\n"
            "whole and cut into chunks of N tokens (N = -c); each chunk is evaluated from an\n"
            "empty context (its first token replaced by BOS when the model asks for one) and\n"
            "only its second half is scored. Prints the running estimate per chunk, then\n"
            "'Final estimate: PPL = X +/- Y'. With --kl-divergence-base alone the run's\n"
            "probabilities (the top tokens of each scored position and the rest's mass) are\n"
            "saved as well; with --kl-divergence the tokens come from that file and this\n"
            "run is compared with it: PPL ratio, KL divergence (mean and percentiles), the\n"
            "share of positions whose most likely token is the same ('same top p').\n\n"
            "  -f, --file FILE          the text (- or no -f: standard input; one trailing\n"
            "                           newline is dropped, as llama-perplexity does)\n"
            "  -c, --ctx-size N         tokens per chunk (default %d)\n"
            "      --chunks N           at most N chunks (default: all the text holds)\n"
            "  -b, --batch-size N       most tokens per forward pass (default: the chunk)\n"
            "      --ctx N, --batch N   the same as --ctx-size, --batch-size\n"
            "      --kl-divergence-base FILE  where the reference run's probabilities go (or\n"
            "                           come from, with --kl-divergence)\n"
            "      --kl-divergence      compare this run with --kl-divergence-base FILE\n"
            "      --kl-top K           tokens kept per position in the base file; the rest\n"
            "                           is kept as one mass (default %d; the vocabulary size\n"
            "                           keeps every token)\n",
            DEFAULT_CTX, DEFAULT_TOP);
    session_opts_help_with(out, &(struct session_help){ .groups = SESSION_RUNTIME | SESSION_REPORTS });
}

/* Sums over the scored positions, as llama-perplexity keeps them. */
struct kl_sums {
    double nll, nll2, nll_base, nll_base2, nll_nll_base;
    double kld, kld2, p_diff, p_diff2, p_diff4;
    float max_p_diff;
    size_t same_top, count;
};

/* mean and its standard error */
static void mean_err(double sum, double sum2, size_t n, double *mean, double *err) {
    *mean = n ? sum / (double)n : 0;
    double var = n ? sum2 / (double)n - *mean * *mean : 0;
    *err = var > 0 && n > 1 ? sqrt(var / (double)(n - 1)) : 0;
}

static double covariance(double a, double b, double ab, size_t n) {
    if (n < 2) return 0;
    return (ab / (double)n - (a / (double)n) * (b / (double)n)) / (double)(n - 1);
}

/* log-softmax's pieces of one position: max logit, log of sum exp(l - max). */
static void log_norm(const float *logits, int n_vocab, float *max_logit, double *log_sum, int *argmax) {
    float mx = logits[0];
    int best = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx) { mx = logits[i]; best = i; }
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    *max_logit = mx;
    *log_sum = log(sum);
    *argmax = best;
}

/* Percentile as llama-perplexity interpolates it, of sorted values. */
static double percentile(const float *v, size_t n, double fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    double p = fraction * (double)(n - 1);
    size_t ip = (size_t)p;
    p -= (double)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static double median(const float *v, size_t n) { return n % 2 ? v[n / 2] : 0.5 * (v[n / 2] + v[n / 2 - 1]); }

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

struct ppl_run {
    struct session s;
    int n_ctx, n_vocab, n_chunk, first, n_scored; /* n_scored: per chunk */
    int32_t bos;                                  /* -1: the model adds none */
    float *logits;                                /* (n_ctx, n_vocab) */
    int32_t *chunk;                               /* (n_ctx) */
};

/* Evaluates chunk c of tokens (n_ctx of them from c * n_ctx) into r->logits. */
static int eval_chunk(struct ppl_run *r, const int32_t *tokens, int c) {
    memcpy(r->chunk, tokens + (size_t)c * r->n_ctx, sizeof *r->chunk * (size_t)r->n_ctx);
    if (r->bos >= 0) r->chunk[0] = r->bos;
    moex_truncate(r->s.mc, 0);
    if (moex_eval_all_logits(r->s.mc, r->chunk, r->n_ctx, r->logits) != 0)
        return cli_fail("perplexity: chunk %d: %s", c + 1, moex_last_error()), -1;
    return 0;
}

static void report_pass(const struct ppl_run *r, int64_t t0) {
    double s = (cli_time_ns() - t0) / 1e9;
    fprintf(stderr, "moex: %.2f seconds per pass, about %.1f s in all\n", s, s * r->n_chunk);
}

/* Plain perplexity, saving the base file when base is not NULL. */
static int run_perplexity(struct ppl_run *r, const int32_t *tokens, struct kl_base_writer *base) {
    double nll = 0, nll2 = 0;
    size_t count = 0;
    for (int c = 0; c < r->n_chunk; c++) {
        int64_t t0 = cli_time_ns();
        if (eval_chunk(r, tokens, c)) return 1;
        if (c == 0) report_pass(r, t0);
        for (int i = r->first; i < r->n_ctx - 1; i++) {
            const float *row = r->logits + (size_t)i * r->n_vocab;
            int32_t next = tokens[(size_t)c * r->n_ctx + i + 1];
            float mx;
            double log_sum;
            int argmax;
            log_norm(row, r->n_vocab, &mx, &log_sum, &argmax);
            double v = mx + log_sum - row[next];
            nll += v;
            nll2 += v * v;
            count++;
            if (base && kl_base_put(base, row, mx, log_sum, (float)v)) return 1;
        }
        printf("[%d]%.4f,", c + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    putchar('\n');
    double mean, err;
    mean_err(nll, nll2, count, &mean, &err);
    double ppl = exp(mean);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err * ppl);
    return 0;
}

static void kl_position(const float *row, int n_vocab, int32_t next, const struct kl_base_pos *b, int top,
                        uint8_t *in_top, struct kl_sums *k, float *kld_out, float *p_diff_out) {
    float mx;
    double log_sum;
    int argmax;
    log_norm(row, n_vocab, &mx, &log_sum, &argmax);
    double log_z = mx + log_sum;
    double nll = log_z - row[next], nll_base = b->nll;
    /* KL(base || this) over the base's top tokens and the rest as one outcome. */
    double kld = 0, q_rest = 0;
    for (int j = 0; j < top; j++) {
        double lq = row[b->ids[j]] - log_z;
        kld += exp(b->logp[j]) * (b->logp[j] - lq);
        in_top[b->ids[j]] = 1;
    }
    for (int i = 0; i < n_vocab; i++)
        if (!in_top[i]) q_rest += exp((double)row[i] - log_z);
    for (int j = 0; j < top; j++) in_top[b->ids[j]] = 0;
    if (b->log_rest > -INFINITY) {
        double p_rest = exp(b->log_rest);
        kld += q_rest > 0 ? p_rest * (b->log_rest - log(q_rest)) : INFINITY;
    }
    if (kld < 0) kld = 0; /* rounding where both agree */
    k->nll += nll;
    k->nll2 += nll * nll;
    k->nll_base += nll_base;
    k->nll_base2 += nll_base * nll_base;
    k->nll_nll_base += nll * nll_base;
    k->kld += kld;
    k->kld2 += kld * kld;
    k->same_top += argmax == b->ids[0];
    double p_diff = exp(-nll) - exp(-nll_base);
    k->p_diff += p_diff;
    k->p_diff2 += p_diff * p_diff;
    k->p_diff4 += p_diff * p_diff * p_diff * p_diff;
    if (fabs(p_diff) > k->max_p_diff) k->max_p_diff = (float)fabs(p_diff);
    k->count++;
    *kld_out = (float)kld;
    *p_diff_out = (float)p_diff;
}

static void print_chunk_kl(int c, const struct kl_sums *k) {
    double lp, lp_err, lb, lb_err, kl, kl_err, mse, mse_err;
    mean_err(k->nll, k->nll2, k->count, &lp, &lp_err);
    mean_err(k->nll_base, k->nll_base2, k->count, &lb, &lb_err);
    mean_err(k->kld, k->kld2, k->count, &kl, &kl_err);
    mean_err(k->p_diff2, k->p_diff4, k->count, &mse, &mse_err);
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, k->count);
    double ratio_err = sqrt(fmax(0, lp_err * lp_err + lb_err * lb_err - 2 * cov));
    double rms = sqrt(mse), top = (double)k->same_top / (double)k->count;
    printf("%4d    %9.4f +/- %9.4f    %10.5f +/- %10.5f    %10.5f +/- %10.5f    %6.3f +/- %6.3f %%    %6.3f +/- %6.3f %%\n",
           c + 1, exp(lp), exp(lp) * lp_err, lp - lb, ratio_err, kl, kl_err, 100 * rms,
           rms > 0 ? 100 * 0.5 / rms * mse_err : 0, 100 * top,
           k->count > 1 ? 100 * sqrt(top * (1 - top) / (double)(k->count - 1)) : 0);
    fflush(stdout);
}

static void print_kl_summary(const struct kl_sums *k, float *kld, float *p_diff) {
    size_t n = k->count;
    double lp, lp_err, lb, lb_err, kl, kl_err, pd, pd_err, mse, mse_err;
    mean_err(k->nll, k->nll2, n, &lp, &lp_err);
    mean_err(k->nll_base, k->nll_base2, n, &lb, &lb_err);
    mean_err(k->kld, k->kld2, n, &kl, &kl_err);
    mean_err(k->p_diff, k->p_diff2, n, &pd, &pd_err);
    mean_err(k->p_diff2, k->p_diff4, n, &mse, &mse_err);
    double cov = covariance(k->nll, k->nll_base, k->nll_nll_base, n);
    double ppl = exp(lp), ppl_base = exp(lb);
    double ratio_err = sqrt(fmax(0, lp_err * lp_err + lb_err * lb_err - 2 * cov));
    qsort(kld, n, sizeof *kld, cmp_float);
    qsort(p_diff, n, sizeof *p_diff, cmp_float);
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", ppl, ppl * lp_err);
    printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", ppl_base, ppl_base * lb_err);
    if (lp_err > 0 && lb_err > 0) printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * cov / (lp_err * lb_err));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", lp - lb, ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f +/- %10.6f\n", exp(lp - lb), exp(lp - lb) * ratio_err);
    double diff_err = ppl * ppl * lp_err * lp_err + ppl_base * ppl_base * lb_err * lb_err - 2 * ppl * ppl_base * cov;
    printf("Mean PPL(Q)-PPL(base)         : %10.6f +/- %10.6f\n", ppl - ppl_base, sqrt(fmax(0, diff_err)));
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f +/- %10.6f\n", kl, kl_err);
    static const struct { const char *label; double at; } kl_rows[] = {
        { "99.9%  ", 0.999 }, { "99.0%  ", 0.99 }, { "95.0%  ", 0.95 }, { "90.0%  ", 0.90 }, { "Median ", -1 },
        { "10.0%  ", 0.10 },  { " 5.0%  ", 0.05 }, { " 1.0%  ", 0.01 }, { " 0.1%  ", 0.001 },
    };
    printf("Maximum KLD: %10.6f\n", kld[n - 1]);
    for (size_t i = 0; i < sizeof kl_rows / sizeof kl_rows[0]; i++)
        printf("%s KLD: %10.6f\n", kl_rows[i].label,
               kl_rows[i].at < 0 ? median(kld, n) : percentile(kld, n, kl_rows[i].at));
    printf("Minimum KLD: %10.6f\n", kld[0]);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    dp: %6.3f +/- %5.3f %%\n", 100 * pd, 100 * pd_err);
    printf("Maximum dp: %6.3f%%\n", 100.0 * p_diff[n - 1]);
    printf("Median  dp: %6.3f%%\n", 100 * median(p_diff, n));
    printf("Minimum dp: %6.3f%%\n", 100.0 * p_diff[0]);
    double rms = sqrt(mse), top = (double)k->same_top / (double)n;
    printf("RMS dp    : %6.3f +/- %5.3f %%\n", 100 * rms, rms > 0 ? 100 * 0.5 / rms * mse_err : 0);
    printf("Same top p: %6.3f +/- %5.3f %%\n", 100 * top, n > 1 ? 100 * sqrt(top * (1 - top) / (double)(n - 1)) : 0);
}

static int run_kl(struct ppl_run *r, struct kl_base_reader *base) {
    size_t n = (size_t)r->n_chunk * (size_t)r->n_scored;
    float *kld = malloc(sizeof *kld * n), *p_diff = malloc(sizeof *p_diff * n);
    uint8_t *in_top = calloc((size_t)r->n_vocab, 1);
    struct kl_sums k = { 0 };
    struct kl_base_pos pos;
    int rc = 1;
    if (!kld || !p_diff || !in_top) { cli_fail("out of memory"); goto done; }
    printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              dp RMS"
           "            Same top p\n");
    for (int c = 0; c < r->n_chunk; c++) {
        int64_t t0 = cli_time_ns();
        if (eval_chunk(r, base->tokens, c)) goto done;
        if (c == 0) report_pass(r, t0);
        for (int i = r->first; i < r->n_ctx - 1; i++) {
            if (kl_base_next(base, &pos)) goto done;
            size_t at = k.count;
            kl_position(r->logits + (size_t)i * r->n_vocab, r->n_vocab, base->tokens[(size_t)c * r->n_ctx + i + 1], &pos,
                        base->top, in_top, &k, &kld[at], &p_diff[at]);
        }
        print_chunk_kl(c, &k);
    }
    print_kl_summary(&k, kld, p_diff);
    rc = 0;
done:
    free(kld);
    free(p_diff);
    free(in_top);
    return rc;
}

/* Whether the model puts BOS before a text: its tokenizer says so for an empty one. */
static int32_t model_bos(const moex_model *m) {
    int32_t ids[2];
    int n = moex_tokenize(m, "", 0, true, false, ids, 2);
    return n == 1 ? ids[0] : -1;
}

int cmd_perplexity(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    so.groups = SESSION_RUNTIME | SESSION_REPORTS;
    const char *file = NULL, *base_path = NULL;
    int64_t n_ctx = DEFAULT_CTX, n_batch = 0, max_chunks = -1, top = DEFAULT_TOP;
    bool kl = false, ctx_given = false, top_given = false;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v;
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--ctx")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--ctx-size", v, 4, 1 << 20, &n_ctx)) return 2;
            ctx_given = true;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "--batch")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--batch-size", v, 1, 1 << 16, &n_batch)) return 2;
        } else if (!strcmp(a, "--chunks")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--chunks", v, 1, INT32_MAX, &max_chunks)) return 2;
        } else if (!strcmp(a, "--kl-divergence-base")) {
            if (!(base_path = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--kl-divergence")) kl = true;
        else if (!strcmp(a, "--kl-top")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--kl-top", v, 1, 1 << 24, &top)) return 2;
            top_given = true;
        } else return cli_usage("perplexity", "unknown option '%s'", a);
    }
    if (kl && !base_path) return cli_usage("perplexity", "--kl-divergence needs --kl-divergence-base FILE");
    if (kl && file) return cli_usage("perplexity", "--kl-divergence takes the tokens from --kl-divergence-base, not -f");
    if (kl && top_given) return cli_usage("perplexity", "--kl-top sets what a base file keeps: give it when saving one");
    if (top_given && !base_path) return cli_usage("perplexity", "--kl-top needs --kl-divergence-base FILE");
    if (session_opts_finish(&so)) return 2;
    int refused = kl ? outputs_check("--trace", so.trace_path, "--kl-divergence-base", base_path)
                     : outputs_check("--trace", so.trace_path, "-f", file);
    if (!refused && base_path && !kl) refused = outputs_check_session(&so, "--kl-divergence-base", base_path);
    if (!refused && base_path && !kl) refused = outputs_check("--kl-divergence-base", base_path, "-f", file);
    if (refused) return refused;

    /* Inputs and outputs first: a bad path costs no model load. */
    struct kl_base_reader reader = { 0 };
    struct kl_base_writer writer = { 0 };
    char *text = NULL;
    size_t text_len = 0;
    if (kl) {
        if (kl_base_open(&reader, base_path)) return 1;
        if (ctx_given && n_ctx != reader.n_ctx) {
            cli_fail("perplexity: --kl-divergence-base %s holds chunks of %d tokens, not -c %lld", base_path,
                     reader.n_ctx, (long long)n_ctx);
            kl_base_close(&reader);
            return 2;
        }
        n_ctx = reader.n_ctx;
    } else {
        if (cli_read_input("-f", file ? file : "-", &text, &text_len)) return 1;
        if (text_len && text[text_len - 1] == '\n') text[--text_len] = 0;
        if (base_path && kl_base_create(&writer, base_path)) {
            free(text);
            return 1;
        }
    }
    so.n_ctx = (int)n_ctx;
    so.n_batch = n_batch ? (int)n_batch : (int)n_ctx;
    struct ppl_run r = { .n_ctx = (int)n_ctx, .first = (int)n_ctx / 2 };
    r.n_scored = r.n_ctx - 1 - r.first;
    int rc = session_open(&r.s, &so);
    int32_t *tokens = NULL;
    if (rc) goto done;
    rc = 1;
    r.n_vocab = moex_model_n_vocab(r.s.mm);
    if (kl) {
        if (reader.n_vocab != r.n_vocab) {
            cli_fail("perplexity: --kl-divergence-base %s is for a vocabulary of %d tokens; the model has %d", base_path,
                     reader.n_vocab, r.n_vocab);
            rc = 2;
            goto done;
        }
        r.n_chunk = reader.n_chunk;
        if (max_chunks > 0 && max_chunks < r.n_chunk) r.n_chunk = (int)max_chunks;
    } else {
        if (!moex_model_has_tokenizer(r.s.mm)) {
            cli_fail("perplexity: the model has no tokenizer");
            rc = 2;
            goto done;
        }
        int n_tokens = 0;
        if (!(tokens = moex_tokenize_alloc(r.s.mm, text, text_len, true, false, &n_tokens))) {
            cli_fail("perplexity: %s", moex_last_error());
            goto done;
        }
        if (n_tokens < 2 * r.n_ctx) {
            cli_fail("perplexity: the text is %d tokens; -c %d needs at least %d (two chunks)", n_tokens, r.n_ctx,
                     2 * r.n_ctx);
            rc = 2;
            goto done;
        }
        r.n_chunk = n_tokens / r.n_ctx;
        if (max_chunks > 0 && max_chunks < r.n_chunk) r.n_chunk = (int)max_chunks;
        fprintf(stderr, "moex: the text is %d tokens\n", n_tokens);
    }
    r.bos = model_bos(r.s.mm);
    r.logits = malloc(sizeof *r.logits * (size_t)r.n_ctx * (size_t)r.n_vocab);
    r.chunk = malloc(sizeof *r.chunk * (size_t)r.n_ctx);
    if (!r.logits || !r.chunk) { cli_fail("out of memory"); goto done; }
    fprintf(stderr, "moex: perplexity over %d chunks, n_ctx=%d, batch_size=%d, scoring %d tokens per chunk\n",
            r.n_chunk, r.n_ctx, so.n_batch, r.n_scored);
    if (kl) {
        rc = run_kl(&r, &reader);
    } else {
        if (base_path && kl_base_begin(&writer, r.n_ctx, r.n_vocab, r.n_chunk, (int)(top < r.n_vocab ? top : r.n_vocab),
                                       tokens))
            goto done;
        rc = run_perplexity(&r, tokens, base_path ? &writer : NULL);
        if (rc == 0 && base_path) {
            if (kl_base_commit(&writer)) rc = 1;
            else fprintf(stderr, "moex: wrote the base probabilities to %s\n", base_path);
        }
    }
done:
    kl_base_close(&reader);
    kl_base_discard(&writer);
    free(r.logits);
    free(r.chunk);
    free(tokens);
    free(text);
    if (r.s.mm && session_close(&r.s) && rc == 0) rc = 1;
    return rc;
}
