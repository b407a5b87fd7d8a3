/* moex: the command line. Each command lives in its own cmd_*.c. */
#include "cli.h"
#include "outputs.h"

#include "moex_tools.h"

#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    { "run", cmd_run, "generate text from a prompt (default: the built-in small model)" },
    { "chat", cmd_chat, "interactive multi-turn chat" },
    { "eval", cmd_eval, "teacher-forced evaluation of token ids; writes logits" },
    { "tokenize", cmd_tokenize, "print the token ids of a text" },
    { "perplexity", cmd_perplexity, "perplexity of a text, and KL divergence against a saved run (llama-perplexity style)" },
    { "bench", cmd_bench, "prompt processing and generation throughput (llama-bench style)" },
    { "info", cmd_info, "describe a GGUF file (default: the built-in model): metadata and tensors" },
    { "synth", cmd_synth, "make a synthetic GGUF model (--arch)" },
    { "profile", cmd_profile, "record routing statistics of a model" },
    { "probe", cmd_probe, "microbenchmark CPU vs device matmuls per rows M" },
    { "pack", cmd_pack, "pack experts into a device layout file" },
    { "serve", cmd_serve, "OpenAI-compatible HTTP server (chat and text completions)" },
};

static void usage(FILE *out) {
    fprintf(out, "usage: moex COMMAND [options]   (moex COMMAND --help for its options; moex --version)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    outputs_install_signal_handlers();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("moex %s\n", moex_version());
        return outputs_flush_stdout(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return outputs_flush_stdout(commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "moex: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
