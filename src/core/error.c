#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char error_message[1024];

int moex_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *moex_error(void) { return error_message; }

void moex_clear_error(void) { error_message[0] = 0; }
