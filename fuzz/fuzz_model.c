/* libFuzzer target for the model loader: the input is written to a file
 * (model_load takes a path and maps it) and loaded. Whatever loads must make
 * a context and evaluate a few tokens without touching memory it does not
 * own; a refusal must come with a message. */
#include "core/error.h"
#include "core/threadpool.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];
static int fd = -1;
static struct threadpool *pool;

static void remove_input(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/moex-fuzz-model-XXXXXX", dir && *dir ? dir : "/tmp");
        if ((fd = mkstemp(path)) < 0) abort();
        atexit(remove_input);
        if (!(pool = threadpool_new(1, false))) abort();
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    moex_clear_error();
    struct model *m = model_load(path);
    if (!m) {
        if (!moex_error()[0]) abort(); /* a refusal says why */
        return 0;
    }
    struct context_params cp = { .n_ctx = 8, .n_batch = 4, .kv_type = KV_F16, .pool = pool };
    struct context *c = context_new(m, &cp);
    if (c) {
        int V = m->hp.n_vocab;
        int32_t ids[3] = { 0, V > 1 ? 1 : 0, V - 1 };
        float *logits = malloc(sizeof(float) * (size_t)V * 3);
        if (logits) context_eval(c, ids, 3, logits, true);
        free(logits);
        context_free(c);
    }
    model_free(m);
    return 0;
}
