/* moex info: what a GGUF file holds. */
#include "cli.h"

#include "core/error.h"
#include "gguf/gguf.h"

#include <stdio.h>
#include <string.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex info [--all] FILE.gguf...\n"
            "Prints the header, architecture hyper-parameters, metadata (long arrays and\n"
            "strings abbreviated unless --all), a tensor table and totals.\n");
}

int cmd_info(int argc, char **argv) {
    bool all = false;
    int n_files = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { help(stdout); return 0; }
        if (!strcmp(argv[i], "--all")) all = true;
        else if (argv[i][0] == '-') { cli_fail("info: unknown option '%s'", argv[i]); help(stderr); return 2; }
    }
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        n_files++;
        struct gguf_file *f = gguf_open(argv[i]);
        if (!f) {
            cli_fail("%s", moex_error());
            rc = 1;
            continue;
        }
        if (gguf_print_info(stdout, f, all) != 0) rc = 1;
        gguf_close(f);
    }
    if (!n_files) { help(stderr); return 2; }
    return rc;
}
