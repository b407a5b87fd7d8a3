#include "oracle_api.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>

enum { N_DEVICE_GREEDY = 16 };

moex_model *oracle_model(const char *relative, const struct moex_device_params *device) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = oracle_path(relative);
    mp.n_threads = 2;
    mp.pin_threads = false;
    if (device) mp.device = *device;
    moex_model *m = moex_model_load(&mp);
    CHECKF(m != NULL, "%s: %s", relative, moex_last_error());
    return m;
}

moex_context *oracle_context(moex_model *m, int n_ctx, int n_batch) {
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    moex_context *c = m ? moex_context_new(m, &cp) : NULL;
    CHECKF(c != NULL, "context: %s", moex_last_error());
    return c;
}

float *oracle_logits(const char *relative, int n, int V) {
    size_t size = 0;
    float *ref = read_whole_file(oracle_path(relative), &size);
    CHECKF(ref && size == sizeof(float) * (size_t)n * V, "%s", relative);
    if (ref && size != sizeof(float) * (size_t)n * V) { free(ref); ref = NULL; }
    return ref;
}

uint64_t oracle_routed_rows(const moex_context *c) {
    struct moex_counters k;
    moex_context_counters(c, &k);
    return k.rows_cpu + k.rows_device;
}

/* n greedy tokens after the prompt. */
static void greedy(moex_context *c, const int32_t *prompt, int n_prompt, int n, int V, int32_t *out) {
    CHECK(moex_eval(c, prompt, n_prompt) == 0);
    for (int i = 0; i < n; i++) {
        const float *logits = moex_logits(c);
        out[i] = logits ? test_argmax(logits, V) : -1;
        if (i + 1 < n) CHECK(moex_eval(c, &out[i], 1) == 0);
    }
}

void oracle_check_devices(const char *label, const char *model, const float *ref, const int32_t *ids_a,
                          const int32_t *ids_b, int n_ids, bool same_greedy) {
    moex_model *m = oracle_model(model, NULL);
    if (!m || !ref) { moex_model_free(m); return; }
    int V = moex_model_n_vocab(m);
    float *cpu = malloc(sizeof(float) * (size_t)n_ids * V), *got = malloc(sizeof(float) * (size_t)n_ids * V);
    int32_t want[N_DEVICE_GREEDY], tokens[N_DEVICE_GREEDY];
    if (same_greedy) {
        moex_context *c0 = oracle_context(m, n_ids + N_DEVICE_GREEDY, n_ids);
        if (c0) greedy(c0, ids_a, n_ids, N_DEVICE_GREEDY, V, want);
        moex_context_free(c0);
    }
    moex_model_free(m);
    moex_context *c;
    static const char *devices[] = { "cpu", "sim", "amx" };
    for (int d = 0; d < 3; d++) {
        struct moex_device_params dp = { .device = devices[d], .hot_fraction = 1.0, .min_m = 1 };
        m = oracle_model(model, &dp);
        c = oracle_context(m, n_ids + N_DEVICE_GREEDY, n_ids);
        if (!c) { moex_model_free(m); continue; }
        CHECK(moex_eval_all_logits(c, ids_a, n_ids, d ? got : cpu) == 0);
        struct moex_counters k;
        moex_context_counters(c, &k);
        bool ran = strcmp(k.device, "none") != 0;
        struct logit_measures x = compare_logits(ref, d ? got : cpu, n_ids, V);
        printf("%s device %s (runs as %s), every expert resident, vs llama.cpp Q4_K_M: argmax %.4f  mean KL %.2e  "
               "median max|diff| %.4f\n", label, devices[d], k.device, x.argmax_agree, x.mean_kl, x.median_maxdiff);
        CHECKF(x.argmax_agree >= 0.85 && x.mean_kl <= 0.05 && x.median_maxdiff <= 0.6, "%s device %s", label,
               devices[d]);
        if (d && ran)
            CHECKF(memcmp(got, cpu, sizeof(float) * (size_t)n_ids * V) == 0, "%s device %s differs from cpu", label,
                   devices[d]);
        uint64_t all = k.resident_bytes;
        if (ran) CHECK(all > 0);
        if (same_greedy) {
            moex_truncate(c, 0);
            greedy(c, ids_a, n_ids, N_DEVICE_GREEDY, V, tokens);
            CHECKF(memcmp(tokens, want, sizeof want) == 0, "%s device %s: greedy tokens differ from device none",
                   label, devices[d]);
        }
        moex_context_free(c);
        moex_model_free(m);
        /* Smaller budgets: resident bytes within them, the answer still comes. */
        uint64_t budgets[2] = { all / 2, 1u << 20 };
        for (int b = 0; b < 2 && all; b++) {
            struct moex_device_params db = { .device = devices[d], .hot_budget = budgets[b], .min_m = 1 };
            m = oracle_model(model, &db);
            c = oracle_context(m, n_ids, 16);
            if (c) {
                CHECK(moex_eval_all_logits(c, ids_b, n_ids, got) == 0);
                moex_context_counters(c, &k);
                CHECKF(k.resident_bytes <= budgets[b], "%s device %s budget %llu: resident %llu", label, devices[d],
                       (unsigned long long)budgets[b], (unsigned long long)k.resident_bytes);
            }
            moex_context_free(c);
            moex_model_free(m);
        }
    }
    free(cpu);
    free(got);
}
