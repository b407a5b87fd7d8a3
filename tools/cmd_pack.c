#include "cli.h"

int cmd_pack(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'pack' is not available in this build yet");
}
