#include "cli.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("'chat' is not available in this build yet");
}
