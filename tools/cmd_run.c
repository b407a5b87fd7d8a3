#include "cli.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'run' is not available in this build yet");
}
