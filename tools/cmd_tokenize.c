#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'tokenize' is not available in this build yet");
}
