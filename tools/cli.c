#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("moex: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > max) {
        cli_fail("%s: invalid value '%s' (expected an integer in %lld..%lld)", what, s ? s : "",
                 (long long)min, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *what, const char *s, double min, double max, double *out) {
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < min || v > max) {
        cli_fail("%s: invalid value '%s' (expected a number in %g..%g)", what, s ? s : "", min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_size(const char *what, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : -1;
    double unit = 1;
    if (s && *s && !errno && v >= 0) {
        switch (*end) {
        case 'k': case 'K': unit = 1024.0; end++; break;
        case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
        case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
        case 't': case 'T': unit = 1024.0 * 1024 * 1024 * 1024; end++; break;
        default: break;
        }
        if ((*end == 'B' || *end == 'b') && unit > 1) end++;
        if (!*end && v * unit < 1.8e19) { *out = (uint64_t)(v * unit); return 0; }
    }
    cli_fail("%s: invalid size '%s' (expected e.g. 512M, 6G or a byte count)", what, s ? s : "");
    return -1;
}

int cli_parse_int_list(const char *what, const char *s, int64_t min, int64_t max, int64_t **out) {
    size_t cap = 16, n = 0;
    int64_t *v = malloc(cap * sizeof *v);
    const char *p = s;
    if (!v) return -1;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item) break;
        memcpy(item, p, len);
        item[len] = 0;
        if (n == cap) {
            int64_t *grown = realloc(v, (cap *= 2) * sizeof *v);
            if (!grown) break;
            v = grown;
        }
        if (cli_parse_int(what, item, min, max, &v[n]) != 0) { free(v); return -1; }
        n++;
        p = comma ? comma + 1 : NULL;
        if (comma && !*p) { p = ""; break; }
    }
    if (n == 0 || (p && *p == 0 && s[strlen(s) - 1] == ',')) {
        cli_fail("%s: invalid list '%s' (expected comma-separated integers)", what, s ? s : "");
        free(v);
        return -1;
    }
    *out = v;
    return (int)n;
}

bool cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}
