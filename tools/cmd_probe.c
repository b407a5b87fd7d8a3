#include "cli.h"

int cmd_probe(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'probe' is not available in this build yet");
}
