#include "session.h"

#include "cli.h"
#include "core/error.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void session_opts_defaults(struct session_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv_type = KV_F16;
    o->pin = true;
}

int session_opts_parse(struct session_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    int64_t n;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->model_path = v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--threads", v, 1, 256, &n)) return -1;
        o->threads = (int)n;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--ctx", v, 1, 1 << 20, &n)) return -1;
        o->n_ctx = (int)n;
    } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--batch", v, 1, 1 << 16, &n)) return -1;
        o->n_batch = (int)n;
    } else if (!strcmp(a, "--kv-type")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "f16")) o->kv_type = KV_F16;
        else if (!strcmp(v, "f32")) o->kv_type = KV_F32;
        else return cli_fail("--kv-type: invalid value '%s' (expected f16 or f32)", v), -1;
    } else if (!strcmp(a, "--no-pin")) {
        o->pin = false;
    } else {
        return 0;
    }
    return 1;
}

void session_opts_help(FILE *out) {
    fprintf(out,
            "  -m, --model FILE    GGUF model (default: the built-in small model, made on first use\n"
            "                      in %s)\n"
            "  -t, --threads N     worker threads (default: physical cores)\n"
            "  -c, --ctx N         context length in tokens (default: min(4096, trained))\n"
            "  -b, --batch N       most tokens per forward pass (default: 512)\n"
            "      --kv-type T     KV cache type: f16 (default) or f32\n"
            "      --no-pin        do not pin worker threads to CPUs (pinned by default: an unpinned\n"
            "                      pool migrates and costs ~25 us per parallel step instead of ~2)\n",
            default_model_path());
}

const char *default_model_path(void) {
    static char path[4096];
    if (path[0]) return path;
    const char *dir = getenv("MOEX_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(path, sizeof path, "%s/small.gguf", dir);
    else if (xdg && *xdg) snprintf(path, sizeof path, "%s/moex/small.gguf", xdg);
    else snprintf(path, sizeof path, "%s/.cache/moex/small.gguf", home && *home ? home : "/tmp");
    return path;
}

/* Makes the default model when it does not exist yet. */
int make_default_model(const char *path);

int session_open(struct session *s, const struct session_opts *o) {
    memset(s, 0, sizeof *s);
    const char *path = o->model_path;
    if (!path) {
        path = default_model_path();
        struct stat st;
        if (stat(path, &st) != 0 && make_default_model(path) != 0) return -1;
    }
    s->model = model_load(path);
    if (!s->model) {
        cli_fail("%s", moex_error());
        return -1;
    }
    s->pool = threadpool_new(o->threads, o->pin);
    if (!s->pool) {
        cli_fail("%s", moex_error());
        session_close(s);
        return -1;
    }
    struct context_params cp = { o->n_ctx, o->n_batch, o->kv_type, s->pool };
    s->ctx = context_new(s->model, &cp);
    if (!s->ctx) {
        cli_fail("%s", moex_error());
        session_close(s);
        return -1;
    }
    return 0;
}

void session_close(struct session *s) {
    context_free(s->ctx);
    threadpool_free(s->pool);
    model_free(s->model);
    memset(s, 0, sizeof *s);
}
