/* Dense matmuls (attention projections, shared experts, dense FFN layers,
 * the lm head) through the executor's placement: on the device at prefill
 * when resident, bit for bit the W8A8 reference on cpu, sim and amx; on the
 * CPU at decode (the M rule) and when not resident; the backbone counted in
 * the budget before the experts, and no budget exceeded over many budgets
 * with one and two IOMMU domains. Uses the oracle models. */
#include "exec_run.h"
#include "harness.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "dev/dev.h"
#include "dev/sim.h"
#include "model/model.h"
#include "moe/executor_impl.h"
#include "pack/w8a8.h"

#include <stdlib.h>
#include <string.h>

static struct threadpool *pool;

/* y (n, N) = W8A8 reference of x (n, K) . w^T: the weight packed by rows,
 * the activations quantized per row, exact int32 dots, the output rule. */
static void reference(const struct matrix *w, const float *x, int n, float *y) {
    int K = (int)w->cols, N = (int)w->rows;
    int8_t *codes = malloc(pack_bytes(PACK_ROWS, K, N)), *act = malloc((size_t)n * K);
    float *scales = malloc(sizeof(float) * N), *act_scales = malloc(sizeof(float) * n);
    CHECK(pack_matrix(NULL, PACK_PATH_GENERIC, w->type, w->data, K, N, PACK_ROWS, codes, scales) == PACK_OK);
    CHECK(w8a8_quantize_act(x, n, K, K, act, act_scales) == 0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < N; j++) {
            int32_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int32_t)act[(size_t)i * K + k] * pack_code_at(PACK_ROWS, codes, K, j, k);
            y[(size_t)i * N + j] = w8a8_out(acc, act_scales[i], scales[j]);
        }
    free(codes); free(act); free(scales); free(act_scales);
}

static const struct matrix *find_dense(const struct model *m, enum dense_kind kind, int layer) {
    for (int i = 0; i < m->moe.n_dense; i++)
        if (m->moe.dense[i].kind == kind && m->moe.dense[i].layer == layer) return m->moe.dense[i].w;
    return NULL;
}

static void fill(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((int)(seed >> 9) % 2001 - 1000) / 250.0f;
    }
}

/* 1. One call of layer 0's q, k, v and one of the lm head on a device. */
static void test_reference(struct model *m, const char *device) {
    struct moe_exec_options o = { .device = device, .hot_fraction = 1, .min_m = 1, .pinned_share = -1 };
    struct moe_executor *e = moe_executor_new(&m->moe, pool, 64, &o);
    CHECKF(e != NULL, "%s: %s", device, moex_error());
    if (!e) return;
    if (!strcmp(moe_executor_device(e), "none")) {
        printf("%s: not available here (%s), its reference check is left to the emulated build\n", device,
               moe_executor_note(e));
        moe_executor_free(e);
        return;
    }
    CHECK(moe_executor_backbone_bytes(e) > 0 && executor_dense_resident_bytes(e, DENSE_LM_HEAD) > 0);
    const struct matrix *w[4] = { find_dense(m, DENSE_ATTN_Q, 0), find_dense(m, DENSE_ATTN_K, 0),
                                  find_dense(m, DENSE_ATTN_V, 0), find_dense(m, DENSE_LM_HEAD, -1) };
    CHECK(w[0] && w[1] && w[2] && w[3]);
    if (!w[0] || !w[1] || !w[2] || !w[3]) { moe_executor_free(e); return; }
    enum { ROWS = 24 };
    int K = (int)w[0]->cols;
    float *x = malloc(sizeof(float) * ROWS * K);
    fill(x, (size_t)ROWS * K, 7);
    float *y[4], *want[4];
    for (int i = 0; i < 4; i++) {
        y[i] = calloc((size_t)ROWS * w[i]->rows, sizeof(float));
        want[i] = malloc(sizeof(float) * ROWS * w[i]->rows);
        reference(w[i], x, ROWS, want[i]);
    }
    moe_executor_begin_batch(e, MOE_PREFILL);
    CHECKF(executor_dense(e, 3, w, y, x, ROWS) == 0, "%s: q, k, v left to the CPU", device);
    CHECKF(executor_dense(e, 1, &w[3], &y[3], x, ROWS) == 0, "%s: the lm head left to the CPU", device);
    for (int i = 0; i < 4; i++)
        CHECKF(memcmp(y[i], want[i], sizeof(float) * ROWS * w[i]->rows) == 0, "%s: matrix %d differs from the W8A8 "
               "reference", device, i);
    const struct dense_counters *q = executor_dense_counters(e, MOE_PREFILL, DENSE_ATTN_Q);
    /* one submission for the three (counted under the first), a job per chunk */
    CHECK(q->rows_device == ROWS && q->matmuls_device == 1 && q->submissions >= 1 && q->jobs >= 1);
    CHECK(executor_dense_counters(e, MOE_PREFILL, DENSE_LM_HEAD)->jobs > 1); /* the vocabulary in chunks */
    /* With min M 2, one row (decode) never reaches the device, resident or not. */
    e->min_m = 2;
    moe_executor_begin_batch(e, MOE_DECODE);
    CHECK(executor_dense(e, 3, w, y, x, 1) == 7);
    const struct dense_counters *d = executor_dense_counters(e, MOE_DECODE, DENSE_ATTN_K);
    CHECK(d->rows_cpu == 1 && d->rows_device == 0 && d->submissions == 0);
    /* A matrix the executor was not told about is the caller's. */
    const struct matrix *unknown = &m->token_embd;
    moe_executor_begin_batch(e, MOE_PREFILL);
    CHECK(executor_dense(e, 1, &unknown, &y[3], x, ROWS) == 1);
    /* ... also first in a group: the others still run on the device */
    const struct matrix *mixed[2] = { unknown, w[0] };
    float *mixed_y[2] = { y[3], y[0] };
    memset(y[0], 0, sizeof(float) * ROWS * w[0]->rows);
    CHECK(executor_dense(e, 2, mixed, mixed_y, x, ROWS) == 1);
    CHECK(memcmp(y[0], want[0], sizeof(float) * ROWS * w[0]->rows) == 0);
    for (int i = 0; i < 4; i++) { free(y[i]); free(want[i]); }
    free(x);
    moe_executor_free(e);
}

/* 2. Residency: a budget that holds the staging and q alone puts q on the
 *    device and leaves k and v to the CPU; no experts fit. */
static void test_partial(struct model *m) {
    struct moe_exec_options o = { .device = "sim", .hot_fraction = 1, .min_m = 1, .pinned_share = -1 };
    struct moe_device_plan p;
    CHECK(moe_device_plan(&m->moe, &o, &p) == 0 && p.device[0]);
    uint64_t slot = dev_slot_bytes(NULL, p.slot_values, p.max_n);
    struct dev *d = NULL;
    CHECK(dev_open("sim", NULL, &d) == DEV_OK);
    uint64_t one = d ? dev_pool_bytes(d, 1, p.slot_values, p.max_n) : 0; /* in whole IOVA granules */
    dev_close(d);
    moe_device_plan_free(&p);
    o.hot_fraction = 0;
    o.hot_budget = p.staging_bytes + one; /* q of layer 0: one slot at this model's shapes */
    struct moe_executor *e = moe_executor_new(&m->moe, pool, 64, &o);
    CHECK(e && moe_executor_backbone_bytes(e) == slot);
    int pinned, slots;
    moe_executor_slots(e, &pinned, &slots);
    CHECK(slots == 0);
    const struct matrix *w[3] = { find_dense(m, DENSE_ATTN_Q, 0), find_dense(m, DENSE_ATTN_K, 0),
                                  find_dense(m, DENSE_ATTN_V, 0) };
    int K = (int)w[0]->cols;
    float *x = malloc(sizeof(float) * 16 * K), *y[3];
    fill(x, (size_t)16 * K, 3);
    for (int i = 0; i < 3; i++) y[i] = malloc(sizeof(float) * 16 * w[i]->rows);
    moe_executor_begin_batch(e, MOE_PREFILL);
    CHECK(e && executor_dense(e, 3, w, y, x, 16) == 6);
    for (int i = 0; i < 3; i++) free(y[i]);
    free(x);
    moe_executor_free(e);
}

/* Prefill of n ids (every position's logits), then 4 decode steps. */
static struct exec_run run_model(struct model *m, const struct moe_exec_options *o, const int32_t *ids, int n) {
    struct exec_run_params p = { .pool = pool, .n_ctx = 128, .n_batch = 64, .kv_type = KV_F16, .steps = 4 };
    return exec_run(m, o, &p, ids, n);
}

/* 3. A whole model: at prefill every described kind on the device, at
 *    decode none; the same logits on every device. */
static void test_model(const char *path, const int32_t *ids, int n, const enum dense_kind *kinds, int n_kinds) {
    struct model *m = model_load(oracle_path(path));
    CHECKF(m != NULL, "%s: %s", path, moex_error());
    if (!m) return;
    struct moe_exec_options o = { .device = "sim", .hot_fraction = 1, .pinned_share = -1 };
    struct exec_run sim = run_model(m, &o, ids, n);
    CHECK(sim.ok && sim.backbone > 0);
    for (int i = 0; i < n_kinds; i++) {
        enum dense_kind k = kinds[i];
        CHECKF(sim.dense_dev[MOE_PREFILL][k] > 0 && sim.dense_cpu[MOE_PREFILL][k] == 0,
               "%s: %s at prefill: %llu rows on the device, %llu on the CPU", path, dense_kind_name(k),
               (unsigned long long)sim.dense_dev[MOE_PREFILL][k], (unsigned long long)sim.dense_cpu[MOE_PREFILL][k]);
        CHECKF(sim.dense_dev[MOE_DECODE][k] == 0 && sim.dense_cpu[MOE_DECODE][k] > 0,
               "%s: %s at decode: %llu rows on the device", path, dense_kind_name(k),
               (unsigned long long)sim.dense_dev[MOE_DECODE][k]);
    }
    free(sim.logits);
    /* With min M 1 every device puts the same work on the device. */
    o.min_m = 1;
    sim = run_model(m, &o, ids, n);
    static const char *others[] = { "cpu", "amx" };
    for (int d = 0; d < 2; d++) {
        o.device = others[d];
        struct exec_run r = run_model(m, &o, ids, n);
        if (r.ok && r.backbone == 0) {
            printf("%s: %s not available here\n", path, others[d]);
        } else {
            CHECKF(r.ok && memcmp(r.logits, sim.logits, sizeof(float) * (size_t)n * m->hp.n_vocab) == 0,
                   "%s: %s and sim logits differ with the backbone on the device", path, others[d]);
        }
        free(r.logits);
    }
    free(sim.logits);
    model_free(m);
}

/* 4. Budgets from nothing to everything in small steps, one window or two:
 *    what the device allocates never exceeds the budget, and experts get
 *    slots only once the whole backbone is resident. */
static void test_budgets(struct model *m, const int32_t *ids, int n) {
    struct moe_exec_options all = { .device = "sim", .hot_fraction = 1, .pinned_share = -1 };
    struct moe_device_plan p;
    CHECK(moe_device_plan(&m->moe, &all, &p) == 0 && p.device[0]);
    uint64_t total = p.budget_bytes, backbone_all = p.backbone_bytes;
    moe_device_plan_free(&p);
    /* domains=2 with windows smaller than everything: both are used */
    char two[64];
    snprintf(two, sizeof two, "rk3588,domains=2,iova_mib=%llu", (unsigned long long)(total / 2 / 1048576 + 1));
    const char *figures[2] = { "rk3588,domains=1", two };
    for (int f = 0; f < 2; f++) {
        uint64_t last_backbone = 0;
        for (int i = 0; i <= 40; i++) {
            struct moe_exec_options b = { .device = "sim", .hot_budget = total * (uint64_t)i / 40, .min_m = 1,
                                          .pinned_share = -1, .device_spec = figures[f] };
            if (i == 0) b.hot_budget = 1;
            struct exec_run r = run_model(m, &b, ids, n);
            CHECKF(r.ok && r.resident <= b.hot_budget && r.window_used <= b.hot_budget,
                   "%s, budget %llu: resident %llu, window %llu", figures[f], (unsigned long long)b.hot_budget,
                   (unsigned long long)r.resident, (unsigned long long)r.window_used);
            /* The backbone first: a dense matmul left out did not fit beside the
             * backbone before it, whatever the experts took after. */
            struct moe_device_plan q;
            CHECK(moe_device_plan(&m->moe, &b, &q) == 0);
            if (q.device[0]) {
                uint64_t room = b.hot_budget - q.staging_bytes;
                for (int k = 0; k < m->moe.n_dense; k++) {
                    if (q.dense_slot[k] >= 0) continue;
                    const struct matrix *dw = m->moe.dense[k].w;
                    uint64_t need = (uint64_t)(dw->rows * dw->cols); /* int8 codes alone */
                    CHECKF(need + q.backbone_bytes > room - (uint64_t)q.plan.n_slots * q.expert_bytes ||
                               q.plan.n_slots == 0,
                           "budget %llu: dense matmul %d left out with %d expert slots", (unsigned long long)b.hot_budget,
                           k, q.plan.n_slots);
                }
                CHECK(r.backbone == q.backbone_bytes && r.slots == q.plan.n_slots);
            }
            CHECK(r.backbone >= last_backbone);
            last_backbone = r.backbone;
            moe_device_plan_free(&q);
            if (i == 40) CHECK(r.backbone == backbone_all && r.slots == m->moe.n_layers * m->moe.layers[0].n_expert);
            free(r.logits);
        }
    }
}

int main(void) {
    pool = threadpool_new(2, false);
    int32_t ids[64];
    int n = read_ids_file(oracle_path("logits/ids-a.txt"), ids, 64);
    CHECK(n == 64);
    struct model *m = model_load(oracle_path("models/qwen3moe-o1-Q4_K_M.gguf"));
    CHECKF(m != NULL, "%s", moex_error());
    if (!m || n != 64) return test_finish();
    /* lm head last: the backbone fills in the description's order */
    CHECK(m->moe.n_dense == 2 * 4 + 1 && m->moe.dense[m->moe.n_dense - 1].kind == DENSE_LM_HEAD);
    test_reference(m, "cpu");
    test_reference(m, "sim");
    test_reference(m, "amx");
    test_partial(m);
    test_budgets(m, ids, 16);
    model_free(m);
    static const enum dense_kind attn_head[] = { DENSE_ATTN_Q, DENSE_ATTN_K, DENSE_ATTN_V, DENSE_ATTN_O,
                                                 DENSE_LM_HEAD };
    test_model("models/qwen3moe-o1-Q4_K_M.gguf", ids, 32, attn_head, 5);
    int32_t lfm_ids[32], q35_ids[32];
    static const enum dense_kind lfm[] = { DENSE_ATTN_Q, DENSE_ATTN_O, DENSE_FFN, DENSE_LM_HEAD };
    if (read_ids_file(oracle_path("lfm2moe-o2/logits/ids-a.txt"), lfm_ids, 32) == 32)
        test_model("lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf", lfm_ids, 32, lfm, 4);
    else
        CHECK(!"lfm2moe-o2 ids");
    static const enum dense_kind q35[] = { DENSE_ATTN_Q, DENSE_ATTN_V, DENSE_SHARED_EXPERT, DENSE_LM_HEAD };
    if (read_ids_file(oracle_path("qwen35moe-o3/logits/ids-a.txt"), q35_ids, 32) == 32)
        test_model("qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf", q35_ids, 32, q35, 4);
    else
        CHECK(!"qwen35moe-o3 ids");
    threadpool_free(pool);
    return test_finish();
}
