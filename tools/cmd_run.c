/* moex run: generate text from a prompt. */
#include "cli.h"
#include "generate.h"
#include "outputs.h"
#include "session.h"

#include "core/error.h"
#include "text/tokenizer.h"

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
            "  -f, --file FILE       read the prompt from FILE\n"
            "      --tokens IDS      prompt as comma-separated token ids\n"
            "  -n, --n-predict N     tokens to generate (default 128)\n"
            "      --print-ids       print the generated token ids (one line) instead of text\n"
            "      --ignore-eos      do not stop at end-of-generation tokens\n"
            "      --no-parse-special  treat <|...|> in the prompt as plain text\n",
            default_prompt);
    sampler_opts_help(out);
    session_opts_help(out);
}

int cmd_run(int argc, char **argv) {
    struct session_opts so;
    struct sampler_opts sm;
    if (session_opts_defaults(&so)) return 2;
    sampler_opts_defaults(&sm);
    const char *prompt = NULL, *file = NULL, *tokens = NULL;
    int64_t n_predict = 128;
    bool print_ids = false, ignore_eos = false, parse_special = true;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (!r) r = sampler_opts_parse(&sm, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--tokens")) { if (!(tokens = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v || cli_parse_int("--n-predict", v, 0, 1 << 24, &n_predict)) return 2;
        }
        else if (!strcmp(a, "--print-ids")) print_ids = true;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else { cli_fail("run: unknown option '%s'", a); help(stderr); return 2; }
    }
    if (!!prompt + !!file + !!tokens > 1) return cli_fail("run: give only one of -p, -f and --tokens"), 2;

    int refused = outputs_check("--trace", so.trace_path, "-f", file);
    if (refused) return refused;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) return opened;
    int rc = 1, n_prompt = 0;
    int32_t *ids = NULL;
    char *text = NULL;
    if (tokens) {
        int64_t *v = NULL;
        n_prompt = cli_parse_int_list("--tokens", tokens, 0, s.model->hp.n_vocab - 1, &v);
        if (n_prompt > 0 && (ids = malloc(sizeof *ids * (size_t)n_prompt)))
            for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)v[i];
        free(v);
        if (n_prompt < 0) goto done;
    } else {
        if (!s.model->tok) { cli_fail("run: the model has no tokenizer; use --tokens"); goto done; }
        if (file) {
            FILE *f = fopen(file, "rb");
            long n = -1;
            if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
                (text = malloc((size_t)n + 1)) && fread(text, 1, (size_t)n, f) == (size_t)n)
                text[n] = 0;
            else { cli_fail("run: cannot read %s", file); if (f) fclose(f); goto done; }
            fclose(f);
        } else {
            text = strdup(prompt ? prompt : default_prompt);
        }
        ids = tokenizer_encode_alloc(s.model->tok, text, strlen(text), parse_special, &n_prompt);
        if (!ids) { cli_fail("run: %s", moex_error()); goto done; }
        if (tokenizer_add_bos(s.model->tok) && tokenizer_bos(s.model->tok) >= 0) {
            int32_t *with = malloc(sizeof *with * (size_t)(n_prompt + 1));
            if (!with) goto done;
            with[0] = tokenizer_bos(s.model->tok);
            memcpy(with + 1, ids, sizeof *ids * (size_t)n_prompt);
            free(ids);
            ids = with;
            n_prompt++;
        }
        fputs(text, stdout);
        fflush(stdout);
    }
    if (n_prompt == 0) { cli_fail("run: the prompt is empty"); goto done; }
    if (n_prompt + n_predict > context_n_ctx(s.ctx))
        fprintf(stderr, "moex: note: prompt + generation exceed the context of %d tokens; generation stops there\n",
                context_n_ctx(s.ctx));
    if (n_prompt > context_n_ctx(s.ctx)) { cli_fail("run: the prompt (%d tokens) does not fit the context", n_prompt); goto done; }
    struct sampler *smp = sampler_new(&sm.params, s.model->hp.n_vocab);
    struct generate_result r;
    if (smp && generate(&s, smp, ids, n_prompt, (int)n_predict, ignore_eos, print_ids ? NULL : stdout,
                        print_ids ? stdout : NULL, NULL, &r) == 0) {
        if (!print_ids) { putchar('\n'); fflush(stdout); }
        fprintf(stderr, "moex: prompt %d tokens in %.2f s (%.1f t/s), generated %d tokens in %.2f s (%.1f t/s)\n",
                r.n_prompt, r.prompt_s, r.n_prompt / (r.prompt_s > 0 ? r.prompt_s : 1e-9), r.n_generated,
                r.generate_s, r.n_generated > 1 ? (r.n_generated - 1) / r.generate_s : 0.0);
        rc = 0;
    }
    sampler_free(smp);
done:
    free(ids);
    free(text);
    if (session_close(&s)) rc = 1;
    return rc;
}
