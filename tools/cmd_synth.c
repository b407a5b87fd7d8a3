/* moex synth: make a synthetic GGUF model (qwen3moe by default). */
#include "cli.h"
#include "outputs.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/timer.h"
#include "synth/synth.h"

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
            "  --preset NAME         tiny | small (default) | q30b | q30b-l8 | qwen35-tiny |\n"
            "                        qwen35-35b-a3b | qwen35-a3b-l8 | lfm2-tiny | lfm2-8b-a1b\n"
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
            "  -t, --threads N       threads (default: one per core)\n"
            "  -q, --quiet           no progress bar\n\n"
            "presets: tiny   2 layers, dim 256, 8 experts top-2, vocab 512 (f16)\n"
            "         small  6 layers, dim 512, 32 experts top-4, built-in vocab (q4_k_m)\n"
            "         q30b   Qwen3-30B-A3B: 48 layers, dim 2048, 128 experts top-8, expert ffn 768,\n"
            "                32/4 heads of 128, vocab 151936, ctx 40960 (q4_k_m, ~17 GB)\n"
            "         q30b-l8  the same with 8 layers\n"
            "         qwen35-tiny  qwen35moe, 4 layers (3 delta net + 1 attention), dim 256,\n"
            "                8 experts top-2 and a shared expert, built-in vocab (f16)\n"
            "         qwen35-35b-a3b  Qwen3.5/3.6-35B-A3B: 40 layers, dim 2048, 256 experts top-8,\n"
            "                expert and shared ffn 512, vocab 248320 (q4_k_m)\n"
            "         qwen35-a3b-l8  the same with 8 layers\n"
            "         lfm2-tiny    lfm2moe, 4 layers (conv, conv, attention, conv; 1 dense), dim 256,\n"
            "                      8 experts top-2, vocab 512 (f16); --arch lfm2moe's default\n"
            "         lfm2-8b-a1b  LFM2-8B-A1B: 24 layers (attention at 2, 6, 10, 14, 18, 21; 2 dense,\n"
            "                      ffn 7168), dim 2048, 32 experts top-4, expert ffn 1792, 32/8 heads of 64,\n"
            "                      vocab 65536 (q4_k_m, ~5 GB)\n",
            SYNTH_DEFAULT_SKEW, SYNTH_DEFAULT_LOCALITY);
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL, *preset = NULL, *arch = NULL, *type = NULL, *vocab_from = NULL, *name = NULL;
    /* Shape overrides, applied over the preset whatever the order of the options. */
    static const struct { const char *flag; size_t offset; int64_t min, max; } shape[] = {
        { "--layers", offsetof(struct synth_params, n_layers), 1, 1024 },
        { "--dim", offsetof(struct synth_params, n_embd), 16, 65536 },
        { "--experts", offsetof(struct synth_params, n_expert), 1, 4096 },
        { "--top-k", offsetof(struct synth_params, n_expert_used), 1, 4096 },
        { "--expert-ffn", offsetof(struct synth_params, n_ff_exp), 1, 1 << 20 },
        { "--heads", offsetof(struct synth_params, n_head), 1, 1024 },
        { "--kv-heads", offsetof(struct synth_params, n_head_kv), 1, 1024 },
        { "--head-dim", offsetof(struct synth_params, head_dim), 2, 1024 },
        { "--vocab", offsetof(struct synth_params, n_vocab), 1, 1 << 24 },
        { "--ctx", offsetof(struct synth_params, n_ctx), 1, 1 << 24 },
        { "--threads", offsetof(struct synth_params, n_threads), 1, 1024 },
    };
    enum { N_SHAPE = sizeof shape / sizeof *shape };
    int64_t shape_val[N_SHAPE];
    bool shape_set[N_SHAPE] = {0};
    double skew = -1, locality = -1, rope_base = 0;
    int64_t seed = -1;
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
        else if (!strcmp(a, "--preset")) { if (!(preset = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--arch")) { if (!(arch = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--type")) { if (!(type = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--vocab-from")) { if (!(vocab_from = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--name")) { if (!(name = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--skew")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--skew", v, 0, 10, &skew)) return 2;
        } else if (!strcmp(a, "--locality")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--locality", v, 0, 1, &locality)) return 2;
        } else if (!strcmp(a, "--rope-base")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_float("--rope-base", v, 1.0001, 1e12, &rope_base)) return 2;
        } else if (!strcmp(a, "--seed")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_int("--seed", v, 0, INT64_MAX, &seed)) return 2;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else return cli_usage("synth", "unknown option '%s'", argv[i]);
    }
    if (!out) return cli_usage("synth", "-o OUT.gguf is required");
    if (cli_check_env(NULL)) return 2;
    int refused = outputs_check("-o", out, "--vocab-from", vocab_from);
    if (refused) return refused;
    /* Fail now, not after the model's design: -o's directory must take a new file. */
    struct atomic_file *probe = atomic_file_create(out);
    if (!probe) return cli_fail("synth: %s", moex_error());
    atomic_file_discard(probe);

    if (arch && !preset && !(preset = synth_arch_default_preset(arch))) {
        char names[128];
        synth_arch_names(names, sizeof names);
        cli_fail("--arch: invalid value '%s' (expected %s)", arch, names);
        return 2;
    }
    struct synth_params p;
    if (!preset) preset = "small";
    if (synth_preset(preset, &p)) {
        const char *why = moex_error();
        return cli_fail("--preset: invalid value '%s': %s", preset, strncmp(why, "synth: ", 7) ? why : why + 7), 2;
    }
    if (arch && strcmp(arch, p.arch)) {
        cli_fail("synth: --preset %s is a %s preset, not %s", preset, p.arch, arch);
        return 2;
    }
    for (int s = 0; s < N_SHAPE; s++)
        if (shape_set[s]) *(int *)((char *)&p + shape[s].offset) = (int)shape_val[s];
    if (type && synth_parse_type(type, &p.type))
        return cli_fail("--type: invalid value '%s' (expected f16, q8_0, q4_k, q6_k or q4_k_m)", type), 2;
    if (skew >= 0) p.skew = skew;
    if (locality >= 0) p.locality = locality;
    if (rope_base > 0) p.rope_base = (float)rope_base;
    if (seed >= 0) p.seed = (uint64_t)seed;
    p.vocab_from = vocab_from;
    p.name = name;
    p.progress = !quiet;
    /* A shape whose options contradict each other (top-k above the experts,
     * heads not a multiple of kv-heads) is a bad command line. */
    if (synth_check(&p)) return cli_fail("%s", moex_error()), 2;
    /* The built-in vocabulary keeps its 256 byte tokens and 3 control tokens
     * (src/synth/synth_vocab.c); a --vocab-from file's own limits are found on reading it. */
    if (!vocab_from && p.n_vocab && p.n_vocab < 259)
        return cli_fail("--vocab: invalid value '%d' (the built-in vocabulary needs at least 259: 256 byte tokens "
                        "and 3 control tokens)", p.n_vocab), 2;

    double t0 = time_s();
    if (synth_write(&p, out)) return cli_fail("%s", moex_error());
    struct stat st;
    double size = stat(out, &st) == 0 ? (double)st.st_size : 0;
    fprintf(stderr, "moex: wrote %s: %d layers, dim %d, %d experts top-%d, %s, %.1f MiB in %.1f s\n", out,
            p.n_layers, p.n_embd, p.n_expert, p.n_expert_used, synth_type_name(p.type), size / (1 << 20),
            time_s() - t0);
    return 0;
}
