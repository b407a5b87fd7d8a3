/* Error reporting for library code: functions return -1 (or NULL) and leave a
 * message here; only tools/ print it and exit. */
#ifndef MOEX_ERROR_H
#define MOEX_ERROR_H

#if defined(__GNUC__)
#define MOEX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MOEX_PRINTF(a, b)
#endif

/* Sets this thread's error message; always returns -1 so that
 * `return moex_errorf(...)` reads naturally. */
int moex_errorf(const char *fmt, ...) MOEX_PRINTF(1, 2);
/* The last message set on this thread ("" when none). */
const char *moex_error(void);
void moex_clear_error(void);

#endif
