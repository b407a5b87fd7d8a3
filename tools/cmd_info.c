/* moex info: what a GGUF file holds. */
#include "cli.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex info [--all] [FILE.gguf...]\n"
            "Prints the header, architecture hyper-parameters, metadata (long arrays and\n"
            "strings abbreviated unless --all), a tensor table and totals. Without a file,\n"
            "describes the built-in default model (%s, made on first use).\n\n"
            "      --all           every metadata array and string in full\n",
            default_model_path());
}

int cmd_info(int argc, char **argv) {
    bool all = false;
    int n_files = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { help(stdout); return 0; }
        if (!strcmp(argv[i], "--all")) all = true;
        else if (argv[i][0] == '-') return cli_usage("info", "unknown option '%s'", argv[i]);
    }
    if (cli_check_env(NULL)) return 2;
    for (int i = 1; i <= argc; i++) {
        const char *path = i < argc ? argv[i] : NULL;
        if (path && path[0] == '-') continue;
        if (!path) { /* after the files: the default model when there were none */
            if (n_files) break;
            path = default_model_path();
            struct stat st;
            if (stat(path, &st) != 0 && make_default_model(path) != 0) return 1;
        }
        n_files++;
        char *info = moex_file_info(path, all);
        if (!info) {
            cli_fail("%s", moex_last_error());
            rc = 1;
            continue;
        }
        if (fputs(info, stdout) == EOF) rc = 1;
        free(info);
    }
    return rc;
}
