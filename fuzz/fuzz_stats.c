/* libFuzzer target for the routing statistics reader (--stats FILE,
 * docs/stats-format.md): the input is written to a file and read. Whatever
 * is accepted must be safe to use in full: every layer summarized, checked
 * against a model of its own shape and of another, and written out again;
 * a refusal must come with a message. */
#include "core/error.h"
#include "moe/routing_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char path[4096];
static int fd = -1;

static void remove_input(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/moex-fuzz-stats-XXXXXX", dir && *dir ? dir : "/tmp");
        if ((fd = mkstemp(path)) < 0) abort();
        atexit(remove_input);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    moex_clear_error();
    struct routing_stats *s = routing_stats_read(path);
    if (!s) {
        if (!moex_error()[0]) abort(); /* a refusal says why */
        return 0;
    }
    for (int l = 0; l < s->n_layers; l++) {
        struct routing_layer_summary sum;
        routing_stats_summarize(s, l, &sum);
        if (sum.entropy_norm < -1e-9 || sum.entropy_norm > 1 + 1e-9) abort();
    }
    routing_stats_check_model(s, path, s->model_hash, s->model_size, s->n_layers, s->n_expert);
    routing_stats_check_model(s, path, s->model_hash + 1, s->model_size, s->n_layers + 1, s->n_expert);
    if (routing_stats_write(s, "/dev/null") != 0) abort();
    routing_stats_free(s);
    return 0;
}
