#include "cli.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'synth' is not available in this build yet");
}
