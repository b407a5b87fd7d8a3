/* moex tokenize: the token ids of a text, on one line; or their count, their
 * pieces, or (--detokenize) the text of ids. */
#include "cli.h"
#include "session.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex tokenize [-m MODEL] (-p TEXT | -f FILE) [--no-parse-special] [--pieces | --count]\n"
            "       moex tokenize [-m MODEL] --detokenize (-p IDS | -f FILE)\n"
            "Prints the token ids of the text, space separated, on one line. Special tokens\n"
            "written in the text (<|im_start|>...) are parsed unless --no-parse-special.\n"
            "Only the tokenizer is read: MODEL may be a GGUF without tensors.\n\n"
            "  -m, --model FILE      GGUF with a tokenizer (default: the built-in small model)\n"
            "  -p, --prompt TEXT     text to tokenize\n"
            "  -f, --file FILE       read the text from FILE (- for standard input)\n"
            "      --no-parse-special  treat special-token text as plain text\n"
            "      --pieces          print one token per line as id:'piece' (the token's text,\n"
            "                        escaped: \\n, \\t, \\', \\\\ and \\xHH for other bytes below 0x20\n"
            "                        and 0x7f)\n"
            "      --count           print only the number of tokens\n"
            "      --detokenize      the text is token ids (separated by spaces, commas or newlines):\n"
            "                        print the text they stand for\n");
}

/* A piece as a C string literal writes it: control bytes and the quote escaped. */
static void put_escaped(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        switch (c) {
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\'': fputs("\\'", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        default:
            if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
            else putchar(c);
        }
    }
}

/* --detokenize: the ids of text (spaces, commas or newlines between them) as text. */
static int print_text(const moex_model *tok, const char *what, char *text, size_t len) {
    static const char sep[] = ", \t\r\n";
    int n_vocab = moex_model_n_vocab(tok), n = 0;
    int32_t *ids = malloc(sizeof *ids * (len / 2 + 1)); /* an id and a separator: at least two bytes each */
    if (!ids) return cli_fail("out of memory");
    if (memchr(text, 0, len)) { free(ids); return cli_fail("tokenize: %s: holds a NUL byte (expected token ids)", what), 2; }
    for (char *p = text + strspn(text, sep); *p; p += strspn(p, sep)) {
        size_t item = strcspn(p, sep);
        char end = p[item];
        int64_t v;
        p[item] = 0;
        if (cli_parse_int("--detokenize", p, 0, n_vocab - 1, &v)) { free(ids); return 2; }
        ids[n++] = (int32_t)v;
        p[item] = end;
        p += item;
    }
    size_t out_len = 0;
    char *out = moex_detokenize(tok, ids, n, &out_len);
    free(ids);
    if (!out) return cli_fail("tokenize: %s", moex_last_error());
    fwrite(out, 1, out_len, stdout);
    putchar('\n');
    free(out);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool parse_special = true, pieces = false, count = false, detokenize = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else if (!strcmp(a, "--count")) count = true;
        else if (!strcmp(a, "--detokenize")) detokenize = true;
        else return cli_usage("tokenize", "unknown option '%s'", a);
    }
    if (!prompt == !file) return cli_usage("tokenize", "give exactly one of -p and -f");
    if (pieces + count > 1) return cli_usage("tokenize", "give only one of --pieces and --count");
    if (detokenize && (pieces || count || !parse_special))
        return cli_usage("tokenize", "--detokenize takes no --pieces, --count or --no-parse-special");
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
    int n = 0, rc = 0;
    int32_t *ids = NULL;
    if (detokenize) {
        rc = print_text(tok, file ? file : "-p", text, len);
    } else if (!(ids = moex_tokenize_alloc(tok, text, len, false, parse_special, &n))) {
        rc = cli_fail("tokenize: %s", moex_last_error());
    } else if (count) {
        printf("%d\n", n);
    } else {
        for (int i = 0; i < n; i++) {
            if (pieces) {
                size_t pl;
                const char *p = moex_token_piece(tok, ids[i], &pl);
                printf("%d:'", ids[i]);
                put_escaped(p, pl);
                fputs("'\n", stdout);
            } else {
                printf(i ? " %d" : "%d", ids[i]);
            }
        }
        if (!pieces) putchar('\n');
    }
    free(ids);
    free(text);
    moex_model_free(tok);
    return rc;
}
