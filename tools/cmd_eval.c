/* moex eval: teacher-forced evaluation of token ids as one batch; writes the
 * logits of every position. */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex eval -m MODEL --tokens ID,ID,... --logits OUT [options]\n"
            "Evaluates the token ids as one batch from an empty context and writes the\n"
            "logits of every position to OUT: float32 little-endian, [n_tokens][n_vocab].\n\n"
            "  --tokens LIST       comma-separated token ids\n"
            "  --tokens-file FILE  token ids separated by spaces, commas or newlines\n"
            "  --logits OUT        output file\n");
    session_opts_help(out);
}

/* Reads ids separated by whitespace or commas. */
static int read_ids_file(const char *path, int64_t **ids) {
    FILE *f = fopen(path, "r");
    if (!f) return cli_fail("%s: cannot open", path), -1;
    size_t cap = 256, n = 0;
    int64_t *v = malloc(cap * sizeof *v);
    long long x;
    int c;
    while (v) {
        while ((c = fgetc(f)) == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {}
        if (c == EOF) break;
        ungetc(c, f);
        if (fscanf(f, "%lld", &x) != 1) { free(v); v = NULL; break; }
        if (n == cap) { int64_t *g = realloc(v, (cap *= 2) * sizeof *v); if (!g) { free(v); v = NULL; break; } v = g; }
        v[n++] = x;
    }
    fclose(f);
    if (!v || n == 0) { free(v); return cli_fail("%s: expected token ids", path), -1; }
    *ids = v;
    return (int)n;
}

int cmd_eval(int argc, char **argv) {
    struct session_opts so;
    if (session_opts_defaults(&so)) return 2;
    const char *tokens_arg = NULL, *tokens_file = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (cli_is_help(argv[i])) { help(stdout); return 0; }
        else if (!strcmp(argv[i], "--tokens")) { if (!(tokens_arg = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--tokens-file")) { if (!(tokens_file = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--logits")) { if (!(out_path = cli_value(argc, argv, &i))) return 2; }
        else { cli_fail("eval: unknown option '%s'", argv[i]); help(stderr); return 2; }
    }
    if ((!tokens_arg && !tokens_file) || !out_path) {
        cli_fail("eval: --tokens (or --tokens-file) and --logits are required");
        help(stderr);
        return 2;
    }
    int refused = outputs_check_session(&so, "--logits", out_path);
    if (!refused) refused = outputs_check("--logits", out_path, "--tokens-file", tokens_file);
    if (refused) return refused;
    /* Opened before the work: a bad path fails now, and the logits appear whole or not at all. */
    struct atomic_file *out = atomic_file_create(out_path);
    if (!out) return cli_fail("eval: %s", moex_error());
    int64_t *ids64 = NULL;
    int n = tokens_arg ? cli_parse_int_list("--tokens", tokens_arg, 0, INT32_MAX, &ids64)
                       : read_ids_file(tokens_file, &ids64);
    if (n < 0) { atomic_file_discard(out); return 2; }
    if (!so.n_batch) so.n_batch = n;
    if (!so.n_ctx) so.n_ctx = n;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { atomic_file_discard(out); free(ids64); return opened; }
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    int n_vocab = s.model->hp.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)n * n_vocab);
    int rc = 1;
    if (ids && logits) {
        for (int i = 0; i < n; i++) ids[i] = (int32_t)ids64[i];
        if (context_eval(s.ctx, ids, n, logits, true) != 0) {
            cli_fail("eval: %s", moex_error());
        } else {
            struct atomic_file *f = out;
            out = NULL;
            if (atomic_file_write(f, logits, sizeof(float) * (size_t)n_vocab * (size_t)n) != 0) {
                atomic_file_discard(f);
                cli_fail("eval: %s", moex_error());
            } else if (atomic_file_commit(f) != 0) {
                cli_fail("eval: %s", moex_error());
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
    atomic_file_discard(out);
    if (session_close(&s)) rc = 1;
    return rc;
}
