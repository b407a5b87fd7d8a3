/* libFuzzer target for moex serve's request-head check (the gate,
 * src/serve/serve_head.c): any bytes get a verdict, a refusal a known
 * status and a reason, and an accepted head a request line of HTTP/1.x. */
#include "serve/serve_head.c"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int known[] = { 0, 400, 411, 413, 414, 417, 431, 501, 505 };
    struct serve_limits lim = { .max_body = 1000, .max_header_bytes = 256, .max_headers = 8 };
    char why[256];
    why[0] = 0;
    int status = gate_check_head((const char *)data, size, &lim, why, sizeof why);
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= status == known[i];
    if (!ok || (status && !why[0])) abort();
    if (status == 0 && !memmem(data, size, " HTTP/1.", 8)) abort();
    return 0;
}
