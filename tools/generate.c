#include "generate.h"

#include "cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sampler_opts_defaults(struct sampler_opts *o) {
    moex_sampler_params_default(&o->params);
    o->seed_set = false;
}

/* A seed no two runs share: the kernel's random bytes, else the clock and the process. */
static uint64_t random_seed(void) {
    uint64_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&seed, sizeof seed, 1, f) != 1) seed = (uint64_t)cli_time_ns() ^ ((uint64_t)getpid() << 32);
    if (f) fclose(f);
    return seed & 0xffffffffu; /* printable and retypable as llama.cpp's 32-bit seeds */
}

void sampler_opts_finish(struct sampler_opts *o) {
    if (o->seed_set) return;
    o->params.seed = random_seed();
    o->seed_set = true;
    if (o->params.temperature > 0) fprintf(stderr, "moex: seed %llu\n", (unsigned long long)o->params.seed);
}

void text_unescape(char *s) {
    char *out = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) { *out++ = *p; continue; }
        p++;
        switch (*p) {
        case 'n': *out++ = '\n'; break;
        case 't': *out++ = '\t'; break;
        case 'r': *out++ = '\r'; break;
        case 'a': *out++ = '\a'; break;
        case 'b': *out++ = '\b'; break;
        case 'f': *out++ = '\f'; break;
        case 'v': *out++ = '\v'; break;
        case '\\': case '\'': case '"': *out++ = *p; break;
        case 'x': {
            int v = 0, n = 0;
            while (n < 2 && isxdigit((unsigned char)p[1])) {
                p++;
                v = v * 16 + (isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10);
                n++;
            }
            if (n) *out++ = (char)v;
            else { *out++ = '\\'; *out++ = 'x'; } /* not an escape: kept as typed */
            break;
        }
        default: *out++ = '\\'; *out++ = *p; break;
        }
    }
    *out = 0;
}

int parse_n_predict(const char *v, int64_t min, int64_t *n) {
    if (v && !strcmp(v, "-1")) { *n = INT32_MAX; return 0; }
    if (cli_parse_int("--n-predict", v, min, 1 << 24, n) == 0) return 0;
    fprintf(stderr, "moex: --n-predict: -1 generates until an end of generation or a full context\n");
    return -1;
}

int sampler_opts_parse(struct sampler_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    double d;
    int64_t n;
    struct moex_sampler_params *p = &o->params;
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
    } else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--seed", v, -1, INT64_MAX, &n)) return -1;
        o->seed_set = n >= 0;
        if (n >= 0) p->seed = (uint64_t)n;
    } else {
        return 0;
    }
    return 1;
}

void sampler_opts_help(FILE *out) {
    struct moex_sampler_params d;
    moex_sampler_params_default(&d);
    fprintf(out,
            "      --temp T            temperature; 0 = greedy (default %.2f)\n"
            "      --top-k K           keep the K most likely tokens; 0 = off (default %d)\n"
            "      --top-p P           nucleus sampling; 1 = off (default %.2f)\n"
            "      --min-p P           drop tokens below P x the best probability; 0 = off (default %.2f)\n"
            "      --repeat-penalty R  penalty for recent tokens; 1 = off (default %.2f)\n"
            "      --repeat-last-n N   tokens the penalty looks back over (default %d)\n"
            "  -s, --seed N            random seed; -1 or none: a random one, printed at start\n",
            d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n);
}

struct stream_out {
    FILE *text_out, *ids_out;
    int32_t *generated;
    int n;
};

static const volatile sig_atomic_t *stop_flag;

void generate_stop_on(const volatile sig_atomic_t *flag) { stop_flag = flag; }

static int put_token(void *user, int32_t id, const char *text, size_t len) {
    struct stream_out *o = user;
    if (id >= 0) {
        if (o->generated) o->generated[o->n] = id;
        if (o->ids_out) { fprintf(o->ids_out, o->n ? " %d" : "%d", id); fflush(o->ids_out); }
        o->n++;
    }
    if (o->text_out && len) { fwrite(text, 1, len, o->text_out); fflush(o->text_out); }
    return stop_flag && *stop_flag;
}

int generate(struct session *s, moex_sampler *smp, const int32_t *prompt, int n_prompt, int checkpoint_at,
             int n_predict, bool ignore_eos, FILE *text_out, FILE *ids_out, int32_t *generated,
             struct moex_generate_result *r) {
    struct stream_out out = { text_out, ids_out, generated, 0 };
    struct moex_generate_params gp = { n_predict, ignore_eos, put_token, &out, checkpoint_at };
    int rc = moex_generate(s->mc, smp, prompt, n_prompt, &gp, r);
    if (rc == 0 && r->finish == MOEX_FINISH_CONTEXT) fprintf(stderr, "\nmoex: context is full (%d tokens)\n", moex_n_ctx(s->mc));
    if (ids_out) { fputc('\n', ids_out); fflush(ids_out); }
    if (rc) cli_fail("%s", moex_last_error());
    return rc ? -1 : 0;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

void generate_report(FILE *out, const char *label, const struct moex_generate_result *r) {
    int n = r->n_evaluated;
    fprintf(out, "moex: %s %d token%s in %.2f s", label, n, plural(n), r->prompt_s);
    if (n > 0 && r->prompt_s > 0) fprintf(out, " (%.1f t/s)", n / r->prompt_s);
    fprintf(out, ", generated %d token%s", r->n_generated, plural(r->n_generated));
    if (r->n_generated > 1 && r->generate_s > 0)
        fprintf(out, " in %.2f s (%.1f t/s)", r->generate_s, (r->n_generated - 1) / r->generate_s);
    fputc('\n', out);
}
