/* moex eval: teacher-forced evaluation of token ids as one batch; writes the
 * logits of every position. */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex eval [-m MODEL] (--tokens ID,ID,... | --tokens-file FILE) --logits OUT [options]\n"
            "Evaluates the token ids as one batch from an empty context and writes the\n"
            "logits of every position to OUT: float32 little-endian, [n_tokens][n_vocab].\n\n"
            "  --tokens LIST       comma-separated token ids\n"
            "  --tokens-file FILE  token ids separated by spaces, commas or newlines (- for standard input)\n"
            "  --logits OUT        output file\n");
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

int cmd_eval(int argc, char **argv) {
    struct session_opts so;
    session_opts_defaults(&so);
    const char *tokens_arg = NULL, *tokens_file = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (cli_is_help(argv[i])) { help(stdout); return 0; }
        else if (!strcmp(argv[i], "--tokens")) { if (!(tokens_arg = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--tokens-file")) { if (!(tokens_file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--logits")) { if (!(out_path = cli_value(argc, argv, &i))) return 2; }
        else return cli_usage("eval", "unknown option '%s'", argv[i]);
    }
    if ((!tokens_arg && !tokens_file) || !out_path) {
        return cli_usage("eval", "--tokens (or --tokens-file) and --logits are required");
    }
    if (tokens_arg && tokens_file) return cli_fail("eval: give only one of --tokens and --tokens-file"), 2;
    if (session_opts_finish(&so)) return 2;
    int refused = outputs_check_session(&so, "--logits", out_path);
    if (!refused) refused = outputs_check("--logits", out_path, "--tokens-file", tokens_file);
    if (refused) return refused;
    /* Opened before the work: a bad path fails now, and the logits appear whole or not at all. */
    moex_file *out = moex_file_create(out_path);
    if (!out) return cli_fail("eval: %s", moex_last_error());
    int64_t *ids64 = NULL;
    int n;
    if (tokens_arg) {
        n = cli_parse_int_list("--tokens", tokens_arg, 0, INT32_MAX, &ids64);
    } else {
        char *text;
        size_t len;
        if (cli_read_input("--tokens-file", tokens_file, &text, &len)) { moex_file_discard(out); return 1; }
        n = parse_ids_text(tokens_file, text, len, &ids64);
        free(text);
    }
    if (n < 0) { moex_file_discard(out); return 2; }
    if (!so.n_batch) so.n_batch = n;
    if (!so.n_ctx) so.n_ctx = n;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { moex_file_discard(out); free(ids64); return opened; }
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
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
            if (moex_file_write(f, logits, sizeof(float) * (size_t)n_vocab * (size_t)n) != 0) {
                moex_file_discard(f);
                cli_fail("eval: %s", moex_last_error());
            } else if (moex_file_commit(f) != 0) {
                cli_fail("eval: %s", moex_last_error());
            } else {
                fprintf(stderr, "moex: wrote %d x %d logits to %s\n", n, n_vocab, out_path);
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
