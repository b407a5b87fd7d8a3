/* Logits do not depend on how a prompt is split into forward passes, bit
 * for bit, on every architecture: each oracle file (qwen3moe, lfm2moe,
 * qwen35moe; F32, Q8_0, Q4_K_M) evaluates one prompt at once, in passes of
 * 64 tokens (one call, the context's n_batch splitting it), and in calls of
 * 7 and of 1 token, and every position's logits are the same bytes. The
 * prompt is long enough for passes of 64 to cross the delta net's chunks
 * and the matmuls' blocks of rows inside a pass. Through the public API
 * only (tests/oracle_api.h), on the CPU's kernels of this machine's ISA. */
#include "harness.h"
#include "oracle_api.h"

#include <stdlib.h>
#include <string.h>

enum { N_PROMPT = 150, VOCAB_IDS = 2045 };

/* Every position's logits of ids, in calls of `per_call` tokens (0: one
 * call) on a context of n_batch tokens per pass. */
static int eval_split(moex_model *m, const int32_t *ids, int n, int n_batch, int per_call, float *out) {
    moex_context *c = oracle_context(m, n, n_batch);
    if (!c) return -1;
    int V = moex_model_n_vocab(m), rc = 0;
    for (int t0 = 0; t0 < n && rc == 0; t0 += per_call ? per_call : n) {
        int len = per_call && n - t0 > per_call ? per_call : n - t0;
        rc = moex_eval_all_logits(c, ids + t0, len, out + (size_t)t0 * V);
    }
    moex_context_free(c);
    return rc;
}

static void check_model(const char *path, const int32_t *ids) {
    moex_model *m = oracle_model(path, NULL);
    if (!m) return;
    int V = moex_model_n_vocab(m);
    size_t bytes = sizeof(float) * N_PROMPT * (size_t)V;
    float *whole = malloc(bytes), *split = malloc(bytes);
    CHECKF(eval_split(m, ids, N_PROMPT, N_PROMPT, 0, whole) == 0, "%s at once: %s", path, moex_last_error());
    static const struct { int n_batch, per_call; const char *what; } splits[] = {
        { 64, 0, "passes of 64" }, { 7, 7, "calls of 7" }, { 1, 1, "calls of 1" },
    };
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        memset(split, 0xff, bytes);
        int rc = eval_split(m, ids, N_PROMPT, splits[s].n_batch, splits[s].per_call, split);
        CHECKF(rc == 0, "%s %s: %s", path, splits[s].what, moex_last_error());
        if (rc) continue;
        int first = -1;
        for (int t = 0; t < N_PROMPT && first < 0; t++)
            if (memcmp(whole + (size_t)t * V, split + (size_t)t * V, sizeof(float) * V)) first = t;
        double diff = first < 0 ? 0 : max_abs_diff(whole, split, (size_t)N_PROMPT * V);
        printf("%-46s %-13s %s", path, splits[s].what, first < 0 ? "identical\n" : "");
        if (first >= 0) printf("first different position %d, max |diff| %.3g\n", first, diff);
        CHECKF(first < 0, "%s %s: logits differ from one pass from position %d (max |diff| %.3g)", path,
               splits[s].what, first, diff);
    }
    free(whole);
    free(split);
    moex_model_free(m);
}

int main(void) {
    int32_t ids[N_PROMPT];
    test_seed(24);
    for (int i = 0; i < N_PROMPT; i++) ids[i] = (int32_t)(test_rand() % VOCAB_IDS);
    static const char *types[] = { "F32", "Q8_0", "Q4_K_M" };
    for (int t = 0; t < 3; t++) {
        char path[128];
        snprintf(path, sizeof path, "models/qwen3moe-o1-%s.gguf", types[t]);
        check_model(path, ids);
        snprintf(path, sizeof path, "lfm2moe-o2/models/lfm2moe-o2-%s.gguf", types[t]);
        check_model(path, ids);
        snprintf(path, sizeof path, "qwen35moe-o3/models/qwen35moe-o3-%s.gguf", types[t]);
        check_model(path, ids);
    }
    return test_finish();
}
