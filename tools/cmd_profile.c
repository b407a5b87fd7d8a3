#include "cli.h"

int cmd_profile(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'profile' is not available in this build yet");
}
