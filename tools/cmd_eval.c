/* moex eval: teacher-forced evaluation of token ids as one batch; writes the
 * logits of every position. */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex eval [-m MODEL] (--tokens ID,ID,... | --tokens-file FILE | -p TEXT | -f FILE)\n"
            "                 --logits OUT [options]\n"
            "Evaluates the tokens as one batch from an empty context and writes the\n"
            "logits of every position to OUT: float32 little-endian, [n_tokens][n_vocab].\n\n"
            "  --tokens LIST         comma-separated token ids\n"
            "  --tokens-file FILE    token ids separated by spaces, commas or newlines (- for standard input)\n"
            "  -p, --prompt TEXT     a text, tokenized as moex run does (BOS first when the model asks\n"
            "                        for one; special-token text parsed unless --no-parse-special)\n"
            "  -f, --file FILE       the text of FILE (- for standard input)\n"
            "      --no-parse-special  treat special-token text as plain text\n"
            "  --logits OUT          output file; - writes to standard output (not a terminal)\n");
    session_opts_help_with(out, &(struct session_help){ .groups = SESSION_ALL, .ctx_default = "the number of ids",
                                                        .batch_default = "the number of ids: one batch" });
}

/* Ids separated by whitespace or commas, each checked as --tokens's are.
 * The text is ours to cut. */
static int parse_ids_text(const char *path, char *text, size_t len, int64_t **ids) {
    static const char sep[] = ", \t\r\n";
    char what[4200];
    snprintf(what, sizeof what, "--tokens-file %s", path);
    size_t n = 0, cap = 256;
    int64_t *v = malloc(cap * sizeof *v);
    int rc = v ? 0 : cli_fail("out of memory");
    if (rc == 0 && memchr(text, 0, len)) rc = cli_fail("%s: holds a NUL byte (expected token ids)", what);
    for (char *p = text + strspn(text, sep); rc == 0 && *p; p += strspn(p, sep)) {
        size_t item = strcspn(p, sep);
        bool last = !p[item];
        p[item] = 0;
        if (n == cap) {
            int64_t *g = realloc(v, (cap *= 2) * sizeof *v);
            if (!g) { rc = cli_fail("out of memory"); break; }
            v = g;
        }
        if (cli_parse_int(what, p, 0, INT32_MAX, &v[n++])) rc = -1;
        p += item + !last;
    }
    if (rc == 0 && n == 0) rc = cli_fail("%s: holds no token ids", what);
    if (rc == 0 && n > INT32_MAX) rc = cli_fail("%s: too many token ids", what);
    if (rc) { free(v); return -1; }
    *ids = v;
    return (int)n;
}

/* The logits to OUT: a file written whole or not at all, or standard output. */
static int write_logits(moex_file *out, const float *logits, size_t bytes) {
    if (!out) {
        if (fwrite(logits, 1, bytes, stdout) != bytes || fflush(stdout) != 0)
            return cli_fail("eval: --logits -: cannot write to standard output");
        return 0;
    }
    if (moex_file_write(out, logits, bytes) != 0) {
        moex_file_discard(out);
        return cli_fail("eval: %s", moex_last_error());
    }
    if (moex_file_commit(out) != 0) return cli_fail("eval: %s", moex_last_error());
    return 0;
}

int cmd_eval(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    const char *tokens_arg = NULL, *tokens_file = NULL, *out_path = NULL, *prompt = NULL, *text_file = NULL;
    bool parse_special = true;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "--tokens")) { if (!(tokens_arg = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--tokens-file")) { if (!(tokens_file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(text_file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else if (!strcmp(a, "--logits")) { if (!(out_path = cli_value(argc, argv, &i))) return 2; }
        else return cli_usage("eval", "unknown option '%s'", a);
    }
    int n_inputs = !!tokens_arg + !!tokens_file + !!prompt + !!text_file;
    if (!n_inputs || !out_path)
        return cli_usage("eval", "--tokens (or --tokens-file, -p, -f) and --logits are required");
    if (n_inputs > 1) return cli_fail("eval: give only one of --tokens, --tokens-file, -p and -f"), 2;
    bool to_stdout = !strcmp(out_path, "-");
    if (to_stdout && isatty(STDOUT_FILENO))
        return cli_fail("eval: --logits -: standard output is a terminal; redirect it to a file or a pipe"), 2;
    if (session_opts_finish(&so)) return 2;
    int refused = to_stdout ? 0 : outputs_check_session(&so, "--logits", out_path);
    if (!refused && !to_stdout) refused = outputs_check("--logits", out_path, "--tokens-file", tokens_file);
    if (!refused && !to_stdout) refused = outputs_check("--logits", out_path, "-f", text_file);
    if (refused) return refused;
    /* Opened before the work: a bad path fails now, and the logits appear whole or not at all. */
    moex_file *out = NULL;
    if (!to_stdout && !(out = moex_file_create(out_path))) return cli_fail("eval: %s", moex_last_error());
    int64_t *ids64 = NULL;
    char *text = NULL;
    size_t text_len = 0;
    int n = 0;
    if (tokens_arg) {
        n = cli_parse_int_list("--tokens", tokens_arg, 0, INT32_MAX, &ids64);
    } else if (tokens_file) {
        char *ids_text;
        size_t len;
        if (cli_read_input("--tokens-file", tokens_file, &ids_text, &len)) { moex_file_discard(out); return 1; }
        n = parse_ids_text(tokens_file, ids_text, len, &ids64);
        free(ids_text);
    } else if (text_file) {
        if (cli_read_input("-f", text_file, &text, &text_len)) { moex_file_discard(out); return 1; }
    } else if (!(text = strdup(prompt))) {
        moex_file_discard(out);
        return cli_fail("out of memory");
    } else {
        text_len = strlen(text);
    }
    if (n < 0) { moex_file_discard(out); return 2; }
    if (text && text_len == 0) {
        free(text);
        moex_file_discard(out);
        return cli_fail("eval: %s: the text is empty", text_file ? text_file : "-p"), 2;
    }
    int32_t *ids = NULL;
    moex_model *vocab = NULL;
    if (text) {
        /* The text's length sets the context and batch: it is tokenized first,
         * from the model's vocabulary alone. */
        struct moex_model_params mp;
        moex_model_params_default(&mp);
        mp.path = session_model_path(&so);
        mp.vocab_only = true;
        vocab = mp.path ? moex_model_load(&mp) : NULL;
        int n_text = 0;
        int32_t *text_ids = vocab ? moex_tokenize_alloc(vocab, text, text_len, true, parse_special, &n_text) : NULL;
        if (!text_ids && mp.path) cli_fail("eval: %s", moex_last_error());
        free(text);
        moex_model_free(vocab);
        if (!text_ids) { moex_file_discard(out); return 1; }
        if (n_text == 0) {
            free(text_ids);
            moex_file_discard(out);
            return cli_fail("eval: the text has no tokens"), 2;
        }
        n = n_text;
        if (!(ids64 = malloc(sizeof *ids64 * (size_t)n))) { free(text_ids); moex_file_discard(out); return cli_fail("out of memory"); }
        for (int i = 0; i < n; i++) ids64[i] = text_ids[i];
        free(text_ids);
    }
    if (!so.n_batch) so.n_batch = n;
    if (!so.n_ctx) so.n_ctx = n;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { moex_file_discard(out); free(ids64); return opened; }
    ids = malloc(sizeof *ids * (size_t)n);
    int n_vocab = moex_model_n_vocab(s.mm);
    for (int i = 0; i < n; i++) {
        if (ids64[i] < n_vocab) continue;
        cli_fail("%s: invalid value '%lld' (expected a token id in 0..%d)", tokens_arg ? "--tokens" : "--tokens-file",
                 (long long)ids64[i], n_vocab - 1);
        free(ids);
        free(ids64);
        moex_file_discard(out);
        session_close(&s);
        return 2;
    }
    float *logits = malloc(sizeof(float) * (size_t)n * n_vocab);
    int rc = 1;
    if (ids && logits) {
        for (int i = 0; i < n; i++) ids[i] = (int32_t)ids64[i];
        if (moex_eval_all_logits(s.mc, ids, n, logits) != 0) {
            cli_fail("eval: %s", moex_last_error());
        } else {
            moex_file *f = out;
            out = NULL;
            if (write_logits(f, logits, sizeof(float) * (size_t)n_vocab * (size_t)n) == 0) {
                fprintf(stderr, "moex: wrote %d x %d logits to %s\n", n, n_vocab, to_stdout ? "standard output" : out_path);
                rc = 0;
            }
        }
    } else {
        cli_fail("out of memory");
    }
    free(ids);
    free(ids64);
    free(logits);
    moex_file_discard(out);
    if (session_close(&s)) rc = 1;
    return rc;
}
