/* moex run: generate text from a prompt. */
#include "cli.h"
#include "generate.h"
#include "outputs.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *default_prompt = "Once upon a time";

static void help(FILE *out) {
    fprintf(out,
            "usage: moex run [-m MODEL] [-p PROMPT | -f FILE | --tokens IDS] [options]\n"
            "Streams the continuation of the prompt, then prints prompt and generation\n"
            "speed (tokens/s) on stderr. Without -m, runs the built-in small model.\n\n"
            "  -p, --prompt TEXT     prompt text (default: \"%s\")\n"
            "  -e, --escape          turn \\n, \\t, \\\\, \\xHH... in -p into the characters they name\n"
            "                        (default, as llama.cpp)\n"
            "      --no-escape       take -p as typed\n"
            "  -f, --file FILE       read the prompt from FILE (- for standard input; taken as it is)\n"
            "      --tokens IDS      prompt as comma-separated token ids\n"
            "  -n, --n-predict N     tokens to generate (default 128)\n"
            "                        (-1: until an end of generation or a full context)\n"
            "      --print-ids       print only the generated token ids, on one line, instead of text\n"
            "      --ignore-eos      do not stop at end-of-generation tokens\n"
            "      --no-parse-special  treat <|...|> in the prompt as plain text\n",
            default_prompt);
    sampler_opts_help(out);
    session_opts_help(out);
}

/* --tokens: the list's form is checked before the model loads, its ids
 * against the model's vocabulary after: both are bad values (exit 2). */
static int prompt_from_ids(const char *list, int n_vocab, int32_t **ids, int *n) {
    int64_t *v = NULL;
    int count = cli_parse_int_list("--tokens", list, 0, n_vocab - 1, &v);
    if (count < 0) return -1;
    *ids = malloc(sizeof **ids * (size_t)count);
    if (!*ids) { free(v); return cli_fail("out of memory"), -1; }
    for (int i = 0; i < count; i++) (*ids)[i] = (int32_t)v[i];
    free(v);
    *n = count;
    return 0;
}

int cmd_run(int argc, char **argv) {
    struct session_opts so;
    struct sampler_opts sm;
    session_opts_defaults(&so);
    sampler_opts_defaults(&sm);
    const char *prompt = NULL, *file = NULL, *tokens = NULL;
    int64_t n_predict = 128;
    bool print_ids = false, ignore_eos = false, parse_special = true, escape = true;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (!r) r = sampler_opts_parse(&sm, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--tokens")) {
            int64_t *check = NULL;
            if (!(tokens = cli_value(argc, argv, &i))) return 2;
            if (cli_parse_int_list("--tokens", tokens, 0, INT32_MAX, &check) < 0) return 2;
            free(check);
        }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || parse_n_predict(v, 0, &n_predict)) return 2;
        }
        else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) escape = true;
        else if (!strcmp(a, "--no-escape")) escape = false;
        else if (!strcmp(a, "--print-ids")) print_ids = true;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else return cli_usage("run", "unknown option '%s'", a);
    }
    if (!!prompt + !!file + !!tokens > 1) return cli_fail("run: give only one of -p, -f and --tokens"), 2;
    if (session_opts_finish(&so)) return 2;
    int refused = outputs_check("--trace", so.trace_path, "-f", file);
    if (refused) return refused;
    /* The prompt file is read before the model loads: a bad one costs nothing. */
    char *text = NULL;
    size_t text_len = 0;
    if (file && cli_read_input("-f", file, &text, &text_len)) return 1;
    if (file && text_len == 0) { free(text); return cli_fail("-f %s: the prompt is empty", file), 2; }

    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { free(text); return opened; }
    sampler_opts_finish(&sm); /* the seed is said after the start-up's notes */
    int rc = 1, n_prompt = 0;
    int32_t *ids = NULL;
    if (tokens) {
        if (prompt_from_ids(tokens, moex_model_n_vocab(s.mm), &ids, &n_prompt)) { rc = 2; goto done; }
    } else {
        if (!moex_model_has_tokenizer(s.mm)) { cli_fail("run: the model has no tokenizer; use --tokens"); rc = 2; goto done; }
        if (!file) {
            text = strdup(prompt ? prompt : default_prompt);
            if (text && escape) text_unescape(text);
            text_len = text ? strlen(text) : 0;
        }
        if (!text) { cli_fail("out of memory"); goto done; }
        ids = moex_tokenize_alloc(s.mm, text, text_len, true, parse_special, &n_prompt);
        if (!ids) { cli_fail("run: %s", moex_last_error()); goto done; }
        /* The text output is the prompt and its continuation; --print-ids
         * prints the generated ids alone. */
        if (!print_ids) {
            fwrite(text, 1, text_len, stdout);
            fflush(stdout);
        }
    }
    if (n_prompt == 0) { cli_fail("run: the prompt has no tokens"); rc = 2; goto done; }
    if (n_prompt > moex_n_ctx(s.mc)) {
        cli_fail("run: the prompt (%d tokens) does not fit the context of %d tokens (--ctx)", n_prompt,
                 moex_n_ctx(s.mc));
        rc = 2;
        goto done;
    }
    /* Where prompt + generation exceed the context, generate() says so when it stops. */
    moex_sampler *smp = moex_sampler_new(s.mm, &sm.params);
    struct moex_generate_result r;
    if (!smp) cli_fail("out of memory");
    else if (generate(&s, smp, ids, n_prompt, 0, (int)(n_predict < moex_n_ctx(s.mc) ? n_predict : moex_n_ctx(s.mc)), ignore_eos, print_ids ? NULL : stdout,
                      print_ids ? stdout : NULL, NULL, &r) == 0) {
        if (!print_ids) { putchar('\n'); fflush(stdout); }
        generate_report(stderr, "prompt", &r);
        rc = 0;
    }
    moex_sampler_free(smp);
done:
    free(ids);
    free(text);
    if (session_close(&s)) rc = 1;
    return rc;
}
