/* lfm2moe against llama.cpp (lfm2moe-o2 oracle set): logits of the F32,
 * Q8_0 and Q4_K_M files on both id lists with the README's tolerances, the
 * 24-token greedy continuation, batch vs token-by-token evaluation (the
 * short-convolution state carried between calls), and truncate-and-continue
 * against fresh evaluation; the devices (cpu, sim, amx) with every expert
 * resident give identical logits and stay at llama.cpp's accuracy, and their
 * resident bytes stay inside smaller budgets. Prints the measures. */
#include "harness.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "moe/executor.h"
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_IDS 64

static struct threadpool *pool;

static struct model *load(const char *type) {
    char path[256];
    snprintf(path, sizeof path, "lfm2moe-o2/models/lfm2moe-o2-%s.gguf", type);
    struct model *m = model_load(oracle_path(path));
    CHECKF(m != NULL, "%s: %s", path, moex_error());
    return m;
}

static struct context *new_device_context(struct model *m, int n_ctx, int n_batch,
                                          const struct moe_exec_options *experts) {
    struct context_params cp = { .n_ctx = n_ctx, .n_batch = n_batch, .kv_type = KV_F16, .pool = pool,
                                 .experts = experts };
    struct context *c = context_new(m, &cp);
    CHECKF(c != NULL, "%s", moex_error());
    return c;
}

static struct context *new_context(struct model *m, int n_ctx, int n_batch) {
    return new_device_context(m, n_ctx, n_batch, NULL);
}

static float *read_logits(const char *name, int n, int V) {
    char path[256];
    snprintf(path, sizeof path, "lfm2moe-o2/logits/%s", name);
    size_t size = 0;
    float *ref = read_whole_file(oracle_path(path), &size);
    CHECKF(ref && size == sizeof(float) * (size_t)n * V, "%s", path);
    if (ref && size != sizeof(float) * (size_t)n * V) { free(ref); ref = NULL; }
    return ref;
}

/* Logits of every position of ids, one batch from an empty context. */
static int eval_all(struct model *m, const int32_t *ids, int n, float *out) {
    struct context *c = new_context(m, n, n);
    int rc = c ? context_eval(c, ids, n, out, true) : -1;
    context_free(c);
    return rc;
}

static void test_logits(const char *type, int32_t ids[2][N_IDS]) {
    struct model *m = load(type);
    if (!m) return;
    int V = m->hp.n_vocab;
    float *ref = malloc(sizeof(float) * 2 * N_IDS * V), *ours = malloc(sizeof(float) * 2 * N_IDS * V);
    bool f32 = !strcmp(type, "F32");
    int ok = 1;
    for (int s = 0; s < 2; s++) {
        char name[64];
        snprintf(name, sizeof name, "o2-%s.ids-%c.f32", type, 'a' + s);
        float *r = read_logits(name, N_IDS, V);
        float *o = ours + (size_t)s * N_IDS * V;
        if (!r || eval_all(m, ids[s], N_IDS, o) != 0) { ok = 0; free(r); continue; }
        memcpy(ref + (size_t)s * N_IDS * V, r, sizeof(float) * N_IDS * V);
        struct logit_measures x = compare_logits(r, o, N_IDS, V);
        printf("%-7s ids-%c: argmax agreement %.4f  mean KL %.2e  median max|diff| %.4f  max %.4f\n", type, 'a' + s,
               x.argmax_agree, x.mean_kl, x.median_maxdiff, x.max_maxdiff);
        if (f32) {
            CHECKF(x.argmax_agree == 1.0, "F32 ids-%c argmax %.4f", 'a' + s, x.argmax_agree);
            CHECKF(x.median_maxdiff <= 0.005, "F32 ids-%c median %.4f", 'a' + s, x.median_maxdiff);
        }
        free(r);
    }
    CHECK(ok);
    if (ok) {
        struct logit_measures x = compare_logits(ref, ours, 2 * N_IDS, V);
        printf("%-7s both:  argmax agreement %.4f  mean KL %.2e  median max|diff| %.4f\n", type, x.argmax_agree,
               x.mean_kl, x.median_maxdiff);
        CHECKF(x.argmax_agree >= 0.85, "%s argmax %.4f", type, x.argmax_agree);
        CHECKF(x.mean_kl <= 0.05, "%s KL %.2e", type, x.mean_kl);
        CHECKF(x.median_maxdiff <= 0.6, "%s median %.4f", type, x.median_maxdiff);
    }
    free(ref);
    free(ours);
    model_free(m);
}

/* Greedy decoding after ids-a, one token per eval, gives llama.cpp's 24. */
static void test_greedy(struct model *m, const int32_t *ids) {
    int32_t want[32];
    int n_want = read_ids_file(oracle_path("lfm2moe-o2/logits/o2-F32.ids-a.greedy24.txt"), want, 32);
    CHECK(n_want == 24);
    int V = m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * V);
    struct context *c = new_context(m, N_IDS + 32, 64);
    if (!c || !logits) { free(logits); context_free(c); return; }
    int same = 0;
    CHECK(context_eval(c, ids, N_IDS, logits, false) == 0);
    for (int i = 0; i < n_want; i++) {
        int32_t next = (int32_t)argmax(logits, V);
        same += next == want[i];
        if (next != want[i]) printf("greedy token %d: %d, llama.cpp %d\n", i, next, want[i]);
        if (context_eval(c, &next, 1, logits, false) != 0) break;
    }
    printf("greedy continuation: %d of %d tokens as llama.cpp\n", same, n_want);
    CHECK(same == n_want);
    context_free(c);
    free(logits);
}

/* Token by token (conv state and KV cache carried between calls) equals one
 * batch; llama.cpp's own decode logits for the record. */
static void test_batch_vs_tokens(struct model *m, const int32_t *ids, const float *batch) {
    int V = m->hp.n_vocab;
    float *tokens = malloc(sizeof(float) * N_IDS * V);
    struct context *c = new_context(m, N_IDS, 8);
    if (!c || !tokens) { free(tokens); context_free(c); return; }
    for (int t = 0; t < N_IDS; t++) CHECK(context_eval(c, ids + t, 1, tokens + (size_t)t * V, true) == 0);
    double d = max_abs_diff(tokens, batch, (size_t)N_IDS * V);
    printf("F32 ids-a token by token vs batch: max|diff| %.2e\n", d);
    CHECKF(d <= 5e-3f, "token by token vs batch %g", d);
    float *decode = read_logits("o2-F32.ids-a.decode.f32", N_IDS, V);
    if (decode) {
        struct logit_measures x = compare_logits(decode, tokens, N_IDS, V);
        printf("F32 ids-a token by token vs llama.cpp decode: argmax %.4f  median max|diff| %.4f\n", x.argmax_agree,
               x.median_maxdiff);
        CHECK(x.argmax_agree == 1.0 && x.median_maxdiff <= 0.005);
    }
    free(decode);
    context_free(c);
    free(tokens);
}

/* A conversation truncated and continued gives the logits of the same
 * tokens evaluated fresh in the same pieces: the short-conv state of the
 * kept prefix is restored, not the state after the dropped tokens. */
static void test_truncate(struct model *m, int32_t ids[2][N_IDS]) {
    enum { KEEP = 37, MORE = 20 };
    int V = m->hp.n_vocab;
    float *cont = malloc(sizeof(float) * MORE * V), *fresh = malloc(sizeof(float) * MORE * V);
    struct context *c = new_context(m, 2 * N_IDS, 16);
    struct context *f = new_context(m, 2 * N_IDS, 16);
    if (!c || !f || !cont || !fresh) goto done;
    CHECK(context_eval(c, ids[0], N_IDS, NULL, false) == 0);
    context_truncate(c, KEEP);
    CHECK(context_n_past(c) == KEEP);
    CHECK(context_eval(c, ids[1], MORE, cont, true) == 0);
    CHECK(context_eval(f, ids[0], KEEP, NULL, false) == 0);
    CHECK(context_eval(f, ids[1], MORE, fresh, true) == 0);
    double d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    printf("truncate to %d and continue vs fresh: max|diff| %.2e\n", KEEP, d);
    CHECKF(d <= 1e-5f, "truncate and continue vs fresh %g", d);
    /* With a checkpoint at the cut the state is restored, not replayed. */
    context_truncate(c, 0);
    CHECK(context_eval(c, ids[0], KEEP, NULL, false) == 0);
    context_checkpoint(c);
    CHECK(context_eval(c, ids[0] + KEEP, N_IDS - KEEP, NULL, false) == 0);
    int64_t replayed = context_replayed(c);
    context_truncate(c, KEEP);
    CHECK(context_eval(c, ids[1], MORE, cont, true) == 0);
    CHECKF(context_replayed(c) == replayed, "replayed %lld tokens after a checkpoint",
           (long long)(context_replayed(c) - replayed));
    d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    printf("checkpoint at %d, truncate and continue vs fresh: max|diff| %.2e\n", KEEP, d);
    CHECKF(d <= 1e-5f, "checkpoint, truncate and continue vs fresh %g", d);
    /* The conv state is counted as such. */
    struct context_memory mem;
    context_memory(c, &mem);
    CHECK(mem.conv == (uint64_t)3 * 2 * m->hp.n_embd * sizeof(float) && mem.kv > 0 && mem.recurrent == 0);
    /* Truncating to 0 starts over. */
    context_truncate(c, 0);
    CHECK(context_eval(c, ids[0], KEEP, NULL, false) == 0);
    CHECK(context_eval(c, ids[1], MORE, cont, true) == 0);
    d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    CHECKF(d <= 1e-5f, "truncate to 0 and redo vs fresh %g", d);
done:
    context_free(c);
    context_free(f);
    free(cont);
    free(fresh);
}

/* The Q4_K_M file on each device with every expert resident and min M 1
 * (every routed row on the device): cpu, sim and amx (where it runs) give
 * the same logits bit for bit, within llama.cpp's tolerances; budgets of a
 * half and of 1 MiB hold their resident bytes. */
static void test_devices(int32_t ids[2][N_IDS]) {
    struct model *m = load("Q4_K_M");
    if (!m) return;
    int V = m->hp.n_vocab;
    float *ref = read_logits("o2-Q4_K_M.ids-a.f32", N_IDS, V);
    float *cpu = malloc(sizeof(float) * N_IDS * V), *got = malloc(sizeof(float) * N_IDS * V);
    static const char *devices[] = { "cpu", "sim", "amx" };
    for (int d = 0; d < 3 && ref; d++) {
        struct moe_exec_options o = { .device = devices[d], .hot_fraction = 1.0, .min_m = 1, .pinned_share = -1 };
        struct context *c = new_device_context(m, N_IDS, N_IDS, &o);
        if (!c) continue;
        CHECK(context_eval(c, ids[0], N_IDS, d ? got : cpu, true) == 0);
        const char *ran = moe_executor_device(context_executor(c));
        struct logit_measures x = compare_logits(ref, d ? got : cpu, N_IDS, V);
        printf("device %s (runs as %s), every expert resident, vs llama.cpp Q4_K_M: argmax %.4f  mean KL %.2e  "
               "median max|diff| %.4f\n", devices[d], ran, x.argmax_agree, x.mean_kl, x.median_maxdiff);
        CHECKF(x.argmax_agree >= 0.85 && x.mean_kl <= 0.05 && x.median_maxdiff <= 0.6, "device %s", devices[d]);
        if (d && strcmp(ran, "none") != 0)
            CHECKF(memcmp(got, cpu, sizeof(float) * N_IDS * V) == 0, "device %s differs from cpu", devices[d]);
        uint64_t all = moe_executor_resident_bytes(context_executor(c));
        if (strcmp(ran, "none") != 0) CHECK(all > 0);
        context_free(c);
        /* Smaller budgets: resident bytes within them, the answer still comes. */
        uint64_t budgets[2] = { all / 2, 1u << 20 };
        for (int b = 0; b < 2 && all; b++) {
            struct moe_exec_options ob = { .device = devices[d], .hot_budget = budgets[b], .min_m = 1, .pinned_share = -1 };
            c = new_device_context(m, N_IDS, 16, &ob);
            if (!c) continue;
            CHECK(context_eval(c, ids[1], N_IDS, got, true) == 0);
            uint64_t res = moe_executor_resident_bytes(context_executor(c));
            CHECKF(res <= budgets[b], "device %s budget %llu: resident %llu", devices[d],
                   (unsigned long long)budgets[b], (unsigned long long)res);
            context_free(c);
        }
    }
    free(ref);
    free(cpu);
    free(got);
    model_free(m);
}

int main(void) {
    pool = threadpool_new(2, false);
    int32_t ids[2][N_IDS];
    CHECK(read_ids_file(oracle_path("lfm2moe-o2/logits/ids-a.txt"), ids[0], N_IDS) == N_IDS);
    CHECK(read_ids_file(oracle_path("lfm2moe-o2/logits/ids-b.txt"), ids[1], N_IDS) == N_IDS);
    test_logits("F32", ids);
    test_logits("Q8_0", ids);
    test_logits("Q4_K_M", ids);
    test_devices(ids);
    struct model *m = load("F32");
    if (m) {
        float *batch = malloc(sizeof(float) * N_IDS * m->hp.n_vocab);
        CHECK(eval_all(m, ids[0], N_IDS, batch) == 0);
        test_batch_vs_tokens(m, ids[0], batch);
        test_greedy(m, ids[0]);
        test_truncate(m, ids);
        free(batch);
        model_free(m);
    }
    threadpool_free(pool);
    return test_finish();
}
