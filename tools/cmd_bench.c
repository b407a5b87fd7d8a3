#include "cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'bench' is not available in this build yet");
}
