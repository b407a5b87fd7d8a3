/* qwen35moe against llama.cpp on the oracle set (../shared/oracle/qwen35moe-o3):
 * F32: argmax equal at every position, median max|diff| <= 0.005 on both
 * id lists, the 24-token greedy continuation reproduced exactly; Q8_0 and
 * Q4_K_M: argmax >= 0.85, mean KL <= 0.05, median max|diff| <= 0.6 (the
 * README's noise floors between llama.cpp's own modes are near these); the
 * file with the MTP block gives the Q8_0 file's logits bit for bit. Also:
 * batch (chunked delta rule) vs token by token (recurrent) on F32 within
 * 5e-3, and a context truncated and continued equals a fresh one; on
 * every device (cpu, sim, amx where it runs) with every expert resident the
 * logits equal the cpu device's bit for bit, budgets hold, and the greedy
 * tokens equal those of the CPU's quantized kernels (device none). Prints
 * the measures for the record. Through the public API only
 * (tests/oracle_api.h), as a user runs it. */
#include "harness.h"
#include "oracle_api.h"

#include <stdlib.h>
#include <string.h>

#define N_IDS 64
#define N_GREEDY 24

static moex_model *load(const char *type, const char *prefix) {
    char path[256];
    snprintf(path, sizeof path, "qwen35moe-o3/models/qwen35moe-o3-%s%s.gguf", prefix, type);
    return oracle_model(path, NULL);
}

/* (n, V) logits of ids evaluated as one batch from an empty context. */
static float *batch_logits(moex_model *m, const int32_t *ids, int n) {
    float *out = malloc(sizeof(float) * (size_t)n * moex_model_n_vocab(m));
    moex_context *c = oracle_context(m, n + N_GREEDY, n);
    CHECK(c && moex_eval_all_logits(c, ids, n, out) == 0);
    moex_context_free(c);
    return out;
}

static void check_type(const char *type, int32_t ids[2][N_IDS]) {
    moex_model *m = load(type, "");
    if (!m) return;
    int V = moex_model_n_vocab(m);
    bool f32 = !strcmp(type, "F32");
    for (int s = 0; s < 2; s++) {
        char name[128];
        snprintf(name, sizeof name, "qwen35moe-o3/logits/o3-%s.ids-%c.f32", type, 'a' + s);
        float *ref = oracle_logits(name, N_IDS, V);
        float *ours = batch_logits(m, ids[s], N_IDS);
        if (ref) {
            struct logit_measures r = compare_logits(ref, ours, N_IDS, V);
            printf("%-7s ids-%c: argmax agreement %.4f  mean KL %.2e  median max|diff| %.4f  max %.4f\n", type,
                   'a' + s, r.argmax_agree, r.mean_kl, r.median_maxdiff, r.max_maxdiff);
            if (f32) {
                CHECKF(r.argmax_agree == 1.0, "F32 ids-%c argmax %.4f", 'a' + s, r.argmax_agree);
                CHECKF(r.median_maxdiff <= 0.005, "F32 ids-%c median %.4f", 'a' + s, r.median_maxdiff);
            } else {
                CHECKF(r.argmax_agree >= 0.85, "%s ids-%c argmax %.4f", type, 'a' + s, r.argmax_agree);
                CHECKF(r.mean_kl <= 0.05, "%s ids-%c KL %.2e", type, 'a' + s, r.mean_kl);
                CHECKF(r.median_maxdiff <= 0.6, "%s ids-%c median %.4f", type, 'a' + s, r.median_maxdiff);
            }
        }
        if (f32) {
            /* Token by token (the recurrent form) against our batch (the
             * chunked form) and against llama.cpp's decode mode. */
            float *step = malloc(sizeof(float) * (size_t)N_IDS * V);
            moex_context *c = oracle_context(m, N_IDS, N_IDS);
            for (int t = 0; t < N_IDS && c; t++) CHECK(moex_eval_all_logits(c, ids[s] + t, 1, step + (size_t)t * V) == 0);
            moex_context_free(c);
            struct logit_measures d = compare_logits(ours, step, N_IDS, V);
            printf("F32     ids-%c: token by token vs batch: argmax %.4f  max|diff| %.2e\n", 'a' + s, d.argmax_agree,
                   d.max_maxdiff);
            CHECKF(d.argmax_agree == 1.0 && d.max_maxdiff <= 5e-3, "batch vs token by token: max %.2e", d.max_maxdiff);
            snprintf(name, sizeof name, "qwen35moe-o3/logits/o3-F32.ids-%c.decode.f32", 'a' + s);
            float *ref_step = oracle_logits(name, N_IDS, V);
            if (ref_step) {
                d = compare_logits(ref_step, step, N_IDS, V);
                CHECKF(d.argmax_agree == 1.0 && d.median_maxdiff <= 0.005, "decode vs llama.cpp decode: median %.4f",
                       d.median_maxdiff);
            }
            free(ref_step);
            free(step);
        }
        free(ref);
        free(ours);
    }
    moex_model_free(m);
}

/* Greedy decoding after ids-a: the README's 24 tokens. */
static void check_greedy(const int32_t *ids) {
    moex_model *m = load("F32", "");
    if (!m) return;
    int32_t want[N_GREEDY + 8];
    int n_want = read_ids_file(oracle_path("qwen35moe-o3/logits/o3-F32.ids-a.greedy24.txt"), want, N_GREEDY + 8);
    CHECK(n_want == N_GREEDY);
    int V = moex_model_n_vocab(m);
    moex_context *c = oracle_context(m, N_IDS + N_GREEDY, N_IDS);
    CHECK(c && moex_eval(c, ids, N_IDS) == 0);
    int same = 0;
    for (int i = 0; i < N_GREEDY && c && moex_logits(c); i++) {
        int32_t tok = test_argmax(moex_logits(c), V);
        same += i < n_want && tok == want[i];
        CHECK(moex_eval(c, &tok, 1) == 0);
    }
    printf("F32     greedy continuation of ids-a: %d of %d tokens as llama.cpp's\n", same, N_GREEDY);
    CHECK(same == N_GREEDY);
    moex_context_free(c);
    moex_model_free(m);
}

/* The MTP block is loaded and not run: the same logits as without it. */
static void check_mtp(const int32_t *ids) {
    moex_model *plain = load("Q8_0", ""), *mtp = load("Q8_0", "mtp-");
    if (plain && mtp) {
        struct moex_model_info pi, mi;
        moex_model_get_info(plain, &pi);
        moex_model_get_info(mtp, &mi);
        CHECK(mi.n_layers == pi.n_layers);
        size_t bytes = sizeof(float) * (size_t)N_IDS * moex_model_n_vocab(plain);
        float *a = batch_logits(plain, ids, N_IDS), *b = batch_logits(mtp, ids, N_IDS);
        CHECK(memcmp(a, b, bytes) == 0);
        printf("Q8_0    with the MTP block: %d layers run, logits %s\n", mi.n_layers,
               memcmp(a, b, bytes) ? "differ" : "bit-identical");
        free(a);
        free(b);
    }
    moex_model_free(plain);
    moex_model_free(mtp);
}

/* A context that went one way, was truncated and went another equals a
 * fresh context that only went the second way: with a checkpoint at the
 * truncation point (restored) and without one (replayed). */
static void check_truncate(const int32_t *a, const int32_t *b) {
    moex_model *m = load("F32", "");
    if (!m) return;
    int V = moex_model_n_vocab(m), keep = 20;
    size_t rest = (size_t)(N_IDS - keep) * V;
    float *fresh = malloc(sizeof(float) * rest), *again = malloc(sizeof(float) * rest);
    moex_context *c = oracle_context(m, N_IDS, N_IDS);
    CHECK(c && moex_eval(c, a, keep) == 0 && moex_eval_all_logits(c, a + keep, N_IDS - keep, fresh) == 0);
    moex_context_free(c);
    for (int checkpoint = 1; checkpoint >= 0; checkpoint--) {
        c = oracle_context(m, N_IDS, N_IDS);
        if (!c) continue;
        CHECK(moex_eval(c, a, keep) == 0);
        if (checkpoint) moex_seq_checkpoint(c, 0);
        CHECK(moex_eval(c, b, 30) == 0);
        moex_truncate(c, keep);
        CHECK(moex_n_past(c) == keep);
        CHECK(moex_eval_all_logits(c, a + keep, N_IDS - keep, again) == 0);
        struct logit_measures d = compare_logits(fresh, again, N_IDS - keep, V);
        printf("F32     truncated and continued (%s): max|diff| %.2e\n", checkpoint ? "checkpoint" : "replay",
               d.max_maxdiff);
        CHECKF(d.argmax_agree == 1.0 && d.max_maxdiff <= 1e-4, "%s: max %.2e", checkpoint ? "checkpoint" : "replay",
               d.max_maxdiff);
        moex_context_free(c);
    }
    free(fresh);
    free(again);
    moex_model_free(m);
}

int main(void) {
    int32_t ids[2][N_IDS];
    CHECK(read_ids_file(oracle_path("qwen35moe-o3/logits/ids-a.txt"), ids[0], N_IDS) == N_IDS);
    CHECK(read_ids_file(oracle_path("qwen35moe-o3/logits/ids-b.txt"), ids[1], N_IDS) == N_IDS);
    static const char *types[] = { "F32", "Q8_0", "Q4_K_M" };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_type(types[i], ids);
    check_greedy(ids[0]);
    check_mtp(ids[0]);
    check_truncate(ids[0], ids[1]);
    moex_model *q4 = load("Q4_K_M", "");
    int V = q4 ? moex_model_n_vocab(q4) : 0;
    moex_model_free(q4);
    float *ref = V ? oracle_logits("qwen35moe-o3/logits/o3-Q4_K_M.ids-a.f32", N_IDS, V) : NULL;
    oracle_check_devices("Q4_K_M ", "qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf", ref, ids[0], ids[1], N_IDS, true);
    free(ref);
    return test_finish();
}
