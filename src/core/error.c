#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_message[1024];

/* Formats into a scratch buffer first: callers pass moex_error() as an
 * argument to add context ("layer 3: %s"), and vsnprintf into the buffer it
 * reads from garbles the text. */
int moex_errorf(const char *fmt, ...) {
    char message[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(error_message, message, sizeof message);
    return -1;
}

const char *moex_error(void) { return error_message; }

void moex_clear_error(void) { error_message[0] = 0; }
