/* moex_errorf: a message that adds context to the previous one (D3: the
 * error buffer passed into itself came out garbled, "igure 'nokey'"). */
#include "harness.h"

#include "core/error.h"

#include <string.h>

int main(void) {
    moex_errorf("sim: unknown figure '%s' (see moex probe --sim-help)", "nokey");
    CHECK(moex_errorf("device %s: %s", "sim", moex_error()) == -1);
    CHECKF(!strcmp(moex_error(), "device sim: sim: unknown figure 'nokey' (see moex probe --sim-help)"), "got '%s'",
           moex_error());

    /* Context added twice, the second time after the message. */
    moex_errorf("cannot open: %s", "No such file or directory");
    moex_errorf("layer %d expert %d: %s", 3, 7, moex_error());
    moex_errorf("%s (while packing)", moex_error());
    CHECKF(!strcmp(moex_error(), "layer 3 expert 7: cannot open: No such file or directory (while packing)"),
           "got '%s'", moex_error());

    /* A message longer than the buffer is cut, never overrun, and still
     * starts with the new context. */
    char long_text[3000];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = 0;
    moex_errorf("%s", long_text);
    moex_errorf("ctx: %s", moex_error());
    CHECK(!strncmp(moex_error(), "ctx: xxx", 8));
    CHECK(strlen(moex_error()) < 1024);

    moex_clear_error();
    CHECK(moex_error()[0] == 0);
    return test_finish();
}
