#include "cli.h"

/* Makes the built-in default model; replaced once `moex synth` exists. */
int make_default_model(const char *path);
int make_default_model(const char *path) {
    return cli_fail("no model given and the default model %s does not exist; pass -m MODEL", path);
}
