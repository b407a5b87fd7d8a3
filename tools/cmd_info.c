#include "cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'info' is not available in this build yet");
}
