/* lfm2moe against llama.cpp (lfm2moe-o2 oracle set): logits of the F32,
 * Q8_0 and Q4_K_M files on both id lists with the README's tolerances, the
 * 24-token greedy continuation, batch vs token-by-token evaluation (the
 * short-convolution state carried between calls), and truncate-and-continue
 * against fresh evaluation; the devices (cpu, sim, amx) with every expert
 * resident give identical logits and stay at llama.cpp's accuracy, and their
 * resident bytes stay inside smaller budgets. Prints the measures. Through
 * the public API only (tests/oracle_api.h), as a user runs it. */
#include "harness.h"
#include "oracle_api.h"

#include <stdlib.h>
#include <string.h>

#define N_IDS 64

static moex_model *load(const char *type) {
    char path[256];
    snprintf(path, sizeof path, "lfm2moe-o2/models/lfm2moe-o2-%s.gguf", type);
    return oracle_model(path, NULL);
}

static float *read_logits(const char *name, int n, int V) {
    char path[256];
    snprintf(path, sizeof path, "lfm2moe-o2/logits/%s", name);
    return oracle_logits(path, n, V);
}

/* Logits of every position of ids, one batch from an empty context. */
static int eval_all(moex_model *m, const int32_t *ids, int n, float *out) {
    moex_context *c = oracle_context(m, n, n);
    int rc = c ? moex_eval_all_logits(c, ids, n, out) : -1;
    moex_context_free(c);
    return rc;
}

static void test_logits(const char *type, int32_t ids[2][N_IDS]) {
    moex_model *m = load(type);
    if (!m) return;
    int V = moex_model_n_vocab(m);
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
    moex_model_free(m);
}

/* Greedy decoding after ids-a, one token per eval, gives llama.cpp's 24. */
static void test_greedy(moex_model *m, const int32_t *ids) {
    int32_t want[32];
    int n_want = read_ids_file(oracle_path("lfm2moe-o2/logits/o2-F32.ids-a.greedy24.txt"), want, 32);
    CHECK(n_want == 24);
    int V = moex_model_n_vocab(m);
    moex_context *c = oracle_context(m, N_IDS + 32, 64);
    if (!c) return;
    int same = 0;
    CHECK(moex_eval(c, ids, N_IDS) == 0);
    for (int i = 0; i < n_want && moex_logits(c); i++) {
        int32_t next = test_argmax(moex_logits(c), V);
        same += next == want[i];
        if (next != want[i]) printf("greedy token %d: %d, llama.cpp %d\n", i, next, want[i]);
        if (moex_eval(c, &next, 1) != 0) break;
    }
    printf("greedy continuation: %d of %d tokens as llama.cpp\n", same, n_want);
    CHECK(same == n_want);
    moex_context_free(c);
}

/* Token by token (conv state and KV cache carried between calls) equals one
 * batch; llama.cpp's own decode logits for the record. */
static void test_batch_vs_tokens(moex_model *m, const int32_t *ids, const float *batch) {
    int V = moex_model_n_vocab(m);
    float *tokens = malloc(sizeof(float) * N_IDS * V);
    moex_context *c = oracle_context(m, N_IDS, 8);
    if (!c || !tokens) { free(tokens); moex_context_free(c); return; }
    for (int t = 0; t < N_IDS; t++) CHECK(moex_eval_all_logits(c, ids + t, 1, tokens + (size_t)t * V) == 0);
    double d = max_abs_diff(tokens, batch, (size_t)N_IDS * V);
    printf("F32 ids-a token by token vs batch: max|diff| %.2e\n", d);
    CHECKF(d <= 5e-3, "token by token vs batch %g", d);
    float *decode = read_logits("o2-F32.ids-a.decode.f32", N_IDS, V);
    if (decode) {
        struct logit_measures x = compare_logits(decode, tokens, N_IDS, V);
        printf("F32 ids-a token by token vs llama.cpp decode: argmax %.4f  median max|diff| %.4f\n", x.argmax_agree,
               x.median_maxdiff);
        CHECK(x.argmax_agree == 1.0 && x.median_maxdiff <= 0.005);
    }
    free(decode);
    moex_context_free(c);
    free(tokens);
}

/* The model's embedding width: moex.h has no query for it, moex_file_info's
 * hyper-parameter lines say it. 0 when they do not. */
static int embedding_length(const char *path) {
    char *info = moex_file_info(path, false);
    const char *at = info ? strstr(info, "\n  embedding_length") : NULL;
    int n = 0;
    if (!at || sscanf(at, " embedding_length %d", &n) != 1) n = 0;
    free(info);
    return n;
}

/* A conversation truncated and continued gives the logits of the same
 * tokens evaluated fresh in the same pieces: the short-conv state of the
 * kept prefix is restored, not the state after the dropped tokens. */
static void test_truncate(moex_model *m, int32_t ids[2][N_IDS]) {
    enum { KEEP = 37, MORE = 20 };
    int V = moex_model_n_vocab(m);
    float *cont = malloc(sizeof(float) * MORE * V), *fresh = malloc(sizeof(float) * MORE * V);
    moex_context *c = oracle_context(m, 2 * N_IDS, 16);
    moex_context *f = oracle_context(m, 2 * N_IDS, 16);
    if (!c || !f || !cont || !fresh) goto done;
    CHECK(moex_eval(c, ids[0], N_IDS) == 0);
    moex_truncate(c, KEEP);
    CHECK(moex_n_past(c) == KEEP);
    CHECK(moex_eval_all_logits(c, ids[1], MORE, cont) == 0);
    CHECK(moex_eval(f, ids[0], KEEP) == 0);
    CHECK(moex_eval_all_logits(f, ids[1], MORE, fresh) == 0);
    double d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    printf("truncate to %d and continue vs fresh: max|diff| %.2e\n", KEEP, d);
    CHECKF(d <= 1e-5, "truncate and continue vs fresh %g", d);
    /* With a checkpoint at the cut the state is restored, not replayed: the
     * executor routes the MORE new tokens' rows only (moex.h does not count
     * replayed tokens; the rows it routes are the measure it has). */
    moex_truncate(c, 0);
    CHECK(moex_eval(c, ids[0], KEEP) == 0);
    moex_seq_checkpoint(c, 0);
    CHECK(moex_eval(c, ids[0] + KEEP, N_IDS - KEEP) == 0);
    moex_truncate(c, KEEP);
    uint64_t rows0 = oracle_routed_rows(c);
    CHECK(moex_eval_all_logits(c, ids[1], MORE, cont) == 0);
    uint64_t rows_checkpoint = oracle_routed_rows(c) - rows0;
    d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    printf("checkpoint at %d, truncate and continue vs fresh: max|diff| %.2e\n", KEEP, d);
    CHECKF(d <= 1e-5, "checkpoint, truncate and continue vs fresh %g", d);
    /* Without one the kept tokens are replayed: more rows for the same MORE. */
    moex_truncate(c, 0);
    CHECK(moex_eval(c, ids[0], N_IDS) == 0);
    moex_truncate(c, KEEP);
    rows0 = oracle_routed_rows(c);
    CHECK(moex_eval_all_logits(c, ids[1], MORE, cont) == 0);
    uint64_t rows_replay = oracle_routed_rows(c) - rows0;
    CHECKF(rows_checkpoint > 0 && rows_replay > rows_checkpoint, "rows after a checkpoint %llu, after a replay %llu",
           (unsigned long long)rows_checkpoint, (unsigned long long)rows_replay);
    d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    CHECKF(d <= 1e-5, "replay, truncate and continue vs fresh %g", d);
    /* The conv state is counted as such: 3 conv layers x 2 x n_embd floats. */
    struct moex_memory mem;
    moex_context_memory(c, &mem);
    int n_embd = embedding_length(oracle_path("lfm2moe-o2/models/lfm2moe-o2-F32.gguf"));
    CHECKF(n_embd > 0 && mem.conv == (uint64_t)3 * 2 * n_embd * sizeof(float) && mem.kv > 0 && mem.recurrent == 0,
           "conv %llu bytes (embedding %d), kv %llu, recurrent %llu", (unsigned long long)mem.conv, n_embd,
           (unsigned long long)mem.kv, (unsigned long long)mem.recurrent);
    /* Truncating to 0 starts over. */
    moex_truncate(c, 0);
    CHECK(moex_eval(c, ids[0], KEEP) == 0);
    CHECK(moex_eval_all_logits(c, ids[1], MORE, cont) == 0);
    d = max_abs_diff(cont, fresh, (size_t)MORE * V);
    CHECKF(d <= 1e-5, "truncate to 0 and redo vs fresh %g", d);
done:
    moex_context_free(c);
    moex_context_free(f);
    free(cont);
    free(fresh);
}

int main(void) {
    int32_t ids[2][N_IDS];
    CHECK(read_ids_file(oracle_path("lfm2moe-o2/logits/ids-a.txt"), ids[0], N_IDS) == N_IDS);
    CHECK(read_ids_file(oracle_path("lfm2moe-o2/logits/ids-b.txt"), ids[1], N_IDS) == N_IDS);
    test_logits("F32", ids);
    test_logits("Q8_0", ids);
    test_logits("Q4_K_M", ids);
    moex_model *q4 = load("Q4_K_M");
    int V = q4 ? moex_model_n_vocab(q4) : 0;
    moex_model_free(q4);
    float *ref = V ? read_logits("o2-Q4_K_M.ids-a.f32", N_IDS, V) : NULL;
    oracle_check_devices("lfm2moe Q4_K_M", "lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf", ref, ids[0], ids[1], N_IDS, false);
    free(ref);
    moex_model *m = load("F32");
    if (m) {
        float *batch = malloc(sizeof(float) * N_IDS * moex_model_n_vocab(m));
        CHECK(eval_all(m, ids[0], N_IDS, batch) == 0);
        test_batch_vs_tokens(m, ids[0], batch);
        test_greedy(m, ids[0]);
        test_truncate(m, ids);
        free(batch);
        moex_model_free(m);
    }
    return test_finish();
}
