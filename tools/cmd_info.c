/* moex info: what a GGUF file holds. */
#include "cli.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex info [--all] [-m FILE.gguf] [FILE.gguf...]\n"
            "Prints the header, architecture hyper-parameters, metadata (long arrays and\n"
            "strings abbreviated unless --all), a tensor table and totals. Without a file,\n"
            "describes the built-in default model (%s, made on first use).\n\n"
            "      --all           every metadata array and string in full\n"
            "  -m, --model FILE    a file to describe, as the other commands take a model\n",
            default_model_path());
}

int cmd_info(int argc, char **argv) {
    bool all = false;
    int n_files = 0, rc = 0;
    const char **files = malloc(sizeof *files * (size_t)argc);
    if (!files) return cli_fail("out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { help(stdout); free(files); return 0; }
        if (!strcmp(a, "--all")) all = true;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(files[n_files] = cli_value(argc, argv, &i))) { free(files); return 2; }
            n_files++;
        } else if (a[0] == '-') {
            free(files);
            return cli_usage("info", "unknown option '%s'", a);
        } else files[n_files++] = a;
    }
    if (cli_check_env(NULL)) { free(files); return 2; }
    if (n_files == 0) { /* the default model when there are no files */
        files[n_files++] = default_model_path();
        struct stat st;
        if (stat(files[0], &st) != 0 && make_default_model(files[0]) != 0) { free(files); return 1; }
    }
    for (int i = 0; i < n_files; i++) {
        char *info = moex_file_info(files[i], all);
        if (!info) {
            cli_fail("%s", moex_last_error());
            rc = 1;
            continue;
        }
        if (fputs(info, stdout) == EOF) rc = 1;
        free(info);
    }
    free(files);
    return rc;
}
