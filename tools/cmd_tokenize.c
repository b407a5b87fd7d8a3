/* moex tokenize: the token ids of a text, on one line. */
#include "cli.h"
#include "session.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex tokenize [-m MODEL] (-p TEXT | -f FILE) [--no-parse-special] [--pieces]\n"
            "Prints the token ids of the text, space separated, on one line. Special tokens\n"
            "written in the text (<|im_start|>...) are parsed unless --no-parse-special.\n"
            "Only the tokenizer is read: MODEL may be a GGUF without tensors.\n\n"
            "  -m, --model FILE      GGUF with a tokenizer (default: the built-in small model)\n"
            "  -p, --prompt TEXT     text to tokenize\n"
            "  -f, --file FILE       read the text from FILE (- for standard input)\n"
            "      --no-parse-special  treat special-token text as plain text\n"
            "      --pieces          print one token per line as id:'piece' (the token's text)\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool parse_special = true, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else return cli_usage("tokenize", "unknown option '%s'", a);
    }
    if (!prompt == !file) return cli_usage("tokenize", "give exactly one of -p and -f");
    if (cli_check_env(NULL)) return 2;
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (cli_read_input("-f", file, &text, &len)) return 1;
    } else {
        if (!(text = strdup(prompt))) return cli_fail("out of memory");
        len = strlen(text);
    }
    if (!model) {
        model = default_model_path();
        struct stat st;
        if (stat(model, &st) != 0 && make_default_model(model) != 0) { free(text); return 1; }
    }
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model;
    mp.vocab_only = true;
    moex_model *tok = moex_model_load(&mp);
    if (!tok) { free(text); return cli_fail("%s", moex_last_error()); }
    int n = 0;
    int32_t *ids = moex_tokenize_alloc(tok, text, len, false, parse_special, &n);
    int rc = 0;
    if (!ids) rc = cli_fail("tokenize: %s", moex_last_error());
    for (int i = 0; ids && i < n; i++) {
        if (pieces) {
            size_t pl;
            const char *p = moex_token_piece(tok, ids[i], &pl);
            printf("%d:'%.*s'\n", ids[i], (int)pl, p);
        } else {
            printf(i ? " %d" : "%d", ids[i]);
        }
    }
    if (ids && !pieces) putchar('\n');
    free(ids);
    free(text);
    moex_model_free(tok);
    return rc;
}
