#include "cli.h"

#include "moex_tools.h"


#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("moex: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_usage(const char *command, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "moex: %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (moex %s --help lists the options)\n", command);
    va_end(ap);
    return 2;
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
    if (!s || !*s) {
        cli_fail("%s: invalid list '' (expected comma-separated integers)", what);
        return -1;
    }
    size_t n_items = 1;
    for (const char *p = s; *p; p++) n_items += *p == ',';
    if (n_items > INT32_MAX) return cli_fail("%s: the list has too many items", what), -1;
    int64_t *v = malloc(n_items * sizeof *v);
    char *item = malloc(strlen(s) + 1);
    if (!v || !item) {
        free(v);
        free(item);
        cli_fail("out of memory");
        return -1;
    }
    const char *p = s;
    for (size_t n = 0; n < n_items; n++) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            cli_fail("%s: invalid list '%s': item %zu is empty (expected comma-separated integers)", what, s, n + 1);
            free(v);
            free(item);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (cli_parse_int(what, item, min, max, &v[n]) != 0) {
            free(v);
            free(item);
            return -1;
        }
        p += len + 1;
    }
    free(item);
    *out = v;
    return (int)n_items;
}

int cli_read_input(const char *what, const char *path, char **data, size_t *len) {
    bool is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    struct stat st;
    if (!f) return cli_fail("%s %s: cannot open: %s", what, path, strerror(errno)), -1;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (!is_stdin) fclose(f);
        return cli_fail("%s %s: cannot read: %s", what, path, strerror(EISDIR)), -1;
    }
    /* In chunks: pipes and terminals have no size to ask for. */
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = cap < SIZE_MAX / 4 ? realloc(buf, cap * 2 + 1) : NULL;
            if (!grown) { free(buf); buf = NULL; break; }
            buf = grown;
            cap *= 2;
        }
    }
    int read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
    if (!is_stdin) fclose(f);
    if (!buf) return cli_fail("%s %s: out of memory", what, path), -1;
    if (read_errno) {
        free(buf);
        return cli_fail("%s %s: cannot read: %s", what, path, strerror(read_errno)), -1;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

int cli_check_env(const char *isa_flag) {
    const char *v = getenv("MOEX_CACHE");
    if (v && !*v) return cli_fail("MOEX_CACHE: invalid value '' (expected the directory of the default model)"), -1;
    if (cli_env_no_interleave(&(bool){ false })) return -1;
    if (isa_flag) return cli_set_isa("--isa", isa_flag);
    v = getenv("MOEX_ISA");
    if (v && cli_set_isa("MOEX_ISA", v)) return -1;
    return 0;
}

int cli_env_no_interleave(bool *no_interleave) {
    const char *v = getenv("MOEX_INTERLEAVE");
    if (v && strcmp(v, "0") && strcmp(v, "1"))
        return cli_fail("MOEX_INTERLEAVE: invalid value '%s' (expected 0 or 1)", v), -1;
    if (v) *no_interleave = !strcmp(v, "0");
    return 0;
}

int cli_set_isa(const char *what, const char *isa) {
    if (*isa && moex_set_isa(isa) == 0) return 0;
    if (*isa && !strstr(moex_last_error(), "is not one of")) return cli_fail("%s", moex_last_error()), -1;
    cli_fail("%s: invalid value '%s' (expected scalar, avx2, avx512 or neon)", what, isa);
    return -1;
}

int cli_check_sim(const char *what, const char *value, const char *spec) {
    if (moex_check_sim_figures(spec) == 0) return 0;
    const char *why = moex_last_error();
    if (!strncmp(why, "sim: ", 5)) why += 5;
    cli_fail("%s: invalid value '%s': %s", what, value, why);
    return -1;
}

int64_t cli_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("option %s needs a value", argv[*i]);
        return NULL;
    }
    if (!argv[*i + 1][0]) {
        cli_fail("%s: invalid value '' (empty)", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}
