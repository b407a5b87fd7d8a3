#include "generate.h"

#include "cli.h"
#include "core/error.h"
#include "core/timer.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

void sampler_opts_defaults(struct sampler_opts *o) { sampler_defaults(&o->params); }

int sampler_opts_parse(struct sampler_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    double d;
    int64_t n;
    struct sampler_params *p = &o->params;
    if (!strcmp(a, "--temp")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_float("--temp", v, 0, 100, &d)) return -1;
        p->temperature = (float)d;
    } else if (!strcmp(a, "--top-k")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--top-k", v, 0, 1 << 24, &n)) return -1;
        p->top_k = (int)n;
    } else if (!strcmp(a, "--top-p")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_float("--top-p", v, 0, 1, &d)) return -1;
        p->top_p = (float)d;
    } else if (!strcmp(a, "--min-p")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_float("--min-p", v, 0, 1, &d)) return -1;
        p->min_p = (float)d;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_float("--repeat-penalty", v, 0.01, 100, &d)) return -1;
        p->repeat_penalty = (float)d;
    } else if (!strcmp(a, "--repeat-last-n")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--repeat-last-n", v, 0, 1 << 20, &n)) return -1;
        p->repeat_last_n = (int)n;
    } else if (!strcmp(a, "--seed")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--seed", v, 0, INT64_MAX, &n)) return -1;
        p->seed = (uint64_t)n;
    } else {
        return 0;
    }
    return 1;
}

void sampler_opts_help(FILE *out) {
    struct sampler_params d;
    sampler_defaults(&d);
    fprintf(out,
            "      --temp T            temperature; 0 = greedy (default %.2f)\n"
            "      --top-k K           keep the K most likely tokens; 0 = off (default %d)\n"
            "      --top-p P           nucleus sampling; 1 = off (default %.2f)\n"
            "      --min-p P           drop tokens below P x the best probability; 0 = off (default %.2f)\n"
            "      --repeat-penalty R  penalty for recent tokens; 1 = off (default %.2f)\n"
            "      --repeat-last-n N   tokens the penalty looks back over (default %d)\n"
            "      --seed N            random seed (default %llu)\n",
            d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n,
            (unsigned long long)d.seed);
}

int generate(struct session *s, struct sampler *smp, const int32_t *prompt, int n_prompt, int n_predict,
             bool ignore_eos, FILE *text_out, FILE *ids_out, int32_t *generated, struct generate_result *r) {
    struct model *m = s->model;
    struct tokenizer *tok = m->tok;
    int n_vocab = m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    size_t cap = tok ? tokenizer_stream_bound(tok) : 0;
    char *piece = malloc(cap + 8);
    memset(r, 0, sizeof *r);
    if (!logits || !piece) { free(logits); free(piece); return cli_fail("out of memory"), -1; }
    for (int i = 0; i < n_prompt; i++) sampler_accept(smp, prompt[i]);
    struct tokenizer_stream stream;
    tokenizer_stream_init(&stream);

    double t0 = time_s();
    int rc = context_eval(s->ctx, prompt, n_prompt, logits, false);
    r->n_prompt = n_prompt;
    r->prompt_s = time_s() - t0;
    t0 = time_s();
    for (int i = 0; rc == 0 && i < n_predict; i++) {
        int32_t id = sampler_sample(smp, logits);
        sampler_accept(smp, id);
        if (generated) generated[i] = id;
        r->n_generated++;
        if (ids_out) { fprintf(ids_out, i ? " %d" : "%d", id); fflush(ids_out); }
        bool eog = tok && tokenizer_is_eog(tok, id);
        if (text_out && tok && !eog) {
            int len = tokenizer_stream_put(tok, &stream, id, piece, cap);
            if (len > 0) { fwrite(piece, 1, (size_t)len, text_out); fflush(text_out); }
        }
        if (eog && !ignore_eos) { r->stopped_at_eog = true; break; }
        if (i + 1 == n_predict) break;
        if (context_n_past(s->ctx) >= context_n_ctx(s->ctx)) {
            fprintf(stderr, "\nmoex: context is full (%d tokens)\n", context_n_ctx(s->ctx));
            break;
        }
        rc = context_eval(s->ctx, &id, 1, logits, false);
    }
    r->generate_s = time_s() - t0;
    if (text_out && tok) {
        int len = tokenizer_stream_flush(&stream, piece, cap);
        if (len > 0) fwrite(piece, 1, (size_t)len, text_out);
        fflush(text_out);
    }
    if (ids_out) { fputc('\n', ids_out); fflush(ids_out); }
    if (rc) cli_fail("%s", moex_error());
    free(logits);
    free(piece);
    return rc ? -1 : 0;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

void generate_report(FILE *out, const char *label, const struct generate_result *r) {
    fprintf(out, "moex: %s %d token%s in %.2f s", label, r->n_prompt, plural(r->n_prompt), r->prompt_s);
    if (r->n_prompt > 0 && r->prompt_s > 0) fprintf(out, " (%.1f t/s)", r->n_prompt / r->prompt_s);
    fprintf(out, ", generated %d token%s", r->n_generated, plural(r->n_generated));
    if (r->n_generated > 1 && r->generate_s > 0)
        fprintf(out, " in %.2f s (%.1f t/s)", r->generate_s, (r->n_generated - 1) / r->generate_s);
    fputc('\n', out);
}
