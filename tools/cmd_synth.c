/* moex synth: make a synthetic GGUF model (qwen3moe by default). */
#include "cli.h"
#include "outputs.h"
#include "progress.h"

#include "moex_tools.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex synth -o OUT.gguf [--arch A] [--preset NAME] [options]\n"
            "Makes a GGUF model with random, well-scaled weights whose router\n"
            "prefers experts by a Zipf law per layer and keeps consecutive tokens on\n"
            "shared experts, like a trained MoE. Same options, same bytes.\n\n"
            "  -o, --output FILE     the model to write\n"
            "  --arch A              architecture (default qwen3moe; its default preset)\n"
            "  --preset NAME         one of the presets below (default: small, or --arch's own)\n"
            "  --type T              f16 | q8_0 | q4_k | q6_k | q4_k_m (default: the preset's)\n"
            "  --layers N --dim D --experts E --top-k K --expert-ffn F\n"
            "  --heads H --kv-heads KV --head-dim HD --vocab V --ctx C --rope-base B\n"
            "                        override the preset's shape\n"
            "  --skew S              Zipf exponent of expert popularity per layer (default %.2g; 0 = uniform)\n"
            "  --locality L          0..1, share of routing variation that moves slowly along the\n"
            "                        sequence (default %.2g: ~45%% of experts repeat on the next token)\n"
            "  --seed N              random seed (default 1)\n"
            "  --vocab-from FILE     copy the tokenizer from another GGUF (with --vocab N: its\n"
            "                        first entries plus its special tokens)\n"
            "  --name TEXT           general.name\n"
            "  -t, --threads N       threads (default: physical cores)\n"
            "  -q, --quiet           no progress bar\n\n"
            "presets:\n",
            MOEX_SYNTH_DEFAULT_SKEW, MOEX_SYNTH_DEFAULT_LOCALITY);
    fputs(moex_synth_presets(), out);
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL;
    struct moex_synth_params p;
    moex_synth_params_default(&p);
    /* Shape overrides, applied over the preset whatever the order of the options. */
    static const struct { const char *flag; size_t offset; int64_t min, max; } shape[] = {
        { "--layers", offsetof(struct moex_synth_params, n_layers), 1, 1024 },
        { "--dim", offsetof(struct moex_synth_params, n_embd), 16, 65536 },
        { "--experts", offsetof(struct moex_synth_params, n_expert), 1, 4096 },
        { "--top-k", offsetof(struct moex_synth_params, n_expert_used), 1, 4096 },
        { "--expert-ffn", offsetof(struct moex_synth_params, n_ff_exp), 1, 1 << 20 },
        { "--heads", offsetof(struct moex_synth_params, n_head), 1, 1024 },
        { "--kv-heads", offsetof(struct moex_synth_params, n_head_kv), 1, 1024 },
        { "--head-dim", offsetof(struct moex_synth_params, head_dim), 2, 1024 },
        { "--vocab", offsetof(struct moex_synth_params, n_vocab), 1, 1 << 24 },
        { "--ctx", offsetof(struct moex_synth_params, n_ctx), 1, 1 << 24 },
        { "--threads", offsetof(struct moex_synth_params, n_threads), 1, 1024 },
    };
    enum { N_SHAPE = sizeof shape / sizeof *shape };
    int64_t shape_val[N_SHAPE];
    bool shape_set[N_SHAPE] = {0};
    int64_t seed;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        if (!strcmp(a, "-t")) a = "--threads";
        int s = 0;
        while (s < N_SHAPE && strcmp(a, shape[s].flag)) s++;
        if (s < N_SHAPE) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_int(shape[s].flag, v, shape[s].min, shape[s].max, &shape_val[s])) return 2;
            shape_set[s] = true;
            continue;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) { if (!(out = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--preset")) { if (!(p.preset = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--arch")) { if (!(p.arch = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--type")) { if (!(p.type = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--vocab-from")) { if (!(p.vocab_from = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--name")) { if (!(p.name = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--skew")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--skew", v, 0, 10, &p.skew)) return 2;
        } else if (!strcmp(a, "--locality")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--locality", v, 0, 1, &p.locality)) return 2;
        } else if (!strcmp(a, "--rope-base")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--rope-base", v, 1.0001, 1e12, &p.rope_base)) return 2;
        } else if (!strcmp(a, "--seed")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_int("--seed", v, 0, INT64_MAX, &seed)) return 2;
            p.seed = seed;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else return cli_usage("synth", "unknown option '%s'", argv[i]);
    }
    if (!out) return cli_usage("synth", "-o OUT.gguf is required");
    if (cli_check_env(NULL)) return 2;
    int refused = outputs_check("-o", out, "--vocab-from", p.vocab_from);
    if (refused) return refused;
    /* Fail now, not after the model's design: -o's directory must take a new file. */
    moex_file *probe = moex_file_create(out);
    if (!probe) return cli_fail("synth: %s", moex_last_error());
    moex_file_discard(probe);

    for (int s = 0; s < N_SHAPE; s++)
        if (shape_set[s]) *(int *)((char *)&p + shape[s].offset) = (int)shape_val[s];
    struct progress bar;
    if (!quiet) {
        p.progress = progress_report;
        p.user = &bar;
    }
    struct moex_synth_shape got;
    const char *why;
    switch (moex_synth_check(&p, &got)) {
    case MOEX_SYNTH_OK: break;
    case MOEX_SYNTH_BAD_ARCH:
        why = strstr(moex_last_error(), "is not one of ");
        return cli_fail("--arch: invalid value '%s' (expected %s)", p.arch, why ? why + 14 : "?"), 2;
    case MOEX_SYNTH_OTHER_ARCH: return cli_fail("synth: --%s", moex_last_error()), 2;
    case MOEX_SYNTH_BAD_PRESET:
        why = moex_last_error();
        return cli_fail("--preset: invalid value '%s': %s", p.preset ? p.preset : "small", strncmp(why, "synth: ", 7) ? why : why + 7), 2;
    case MOEX_SYNTH_BAD_TYPE:
        return cli_fail("--type: invalid value '%s' (expected f16, q8_0, q4_k, q6_k or q4_k_m)", p.type), 2;
    case MOEX_SYNTH_BAD_VOCAB:
        return cli_fail("--vocab: invalid value '%d' (%s)", p.n_vocab, moex_last_error()), 2;
    case MOEX_SYNTH_BAD_SHAPE:
        /* options that contradict each other (top-k above the experts, heads
         * not a multiple of kv-heads) are a bad command line */
        return cli_fail("%s", moex_last_error()), 2;
    }

    int64_t t0 = cli_time_ns();
    if (moex_synth_write(&p, out)) return cli_fail("%s", moex_last_error());
    struct stat st;
    double size = stat(out, &st) == 0 ? (double)st.st_size : 0;
    fprintf(stderr, "moex: wrote %s: %d layers, dim %d, %d experts top-%d, %s, %.1f MiB in %.1f s\n", out,
            got.n_layers, got.n_embd, got.n_expert, got.n_expert_used, got.type, size / (1 << 20),
            (cli_time_ns() - t0) * 1e-9);
    return 0;
}
