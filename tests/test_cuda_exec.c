/* The executor driving the cuda device, on the fake CUDA layer (the
 * kernels' host twins stand for the GPU): on the oracle files of the three
 * architectures, with every expert resident and with a third of them,
 * against the CPU path (--device none):
 *   - the logits stay within the quantized types' tolerance of llama.cpp's
 *     (the oracle tests' bounds for the CPU path; the device quantizes
 *     activations to q8 blocks of 32, the CPU path to its own activation
 *     types);
 *   - every routed row runs on the device when all experts are resident
 *     (min M is 1: decode too), some on each side at a third;
 *   - the VRAM the fake handed out never exceeds the budget, and the
 *     device's slots are sized by the model's widest expert type;
 *   - each layer's device work is at most three launches per submission;
 *   - an injected fault mid-run moves the rest to the CPU with the reason
 *     kept and nothing lost (the logits still within the tolerance).
 * Where a GPU and its driver are present the same runs (the fault aside)
 * go through the driver too; elsewhere that part says why it is not run. */
#include "cuda_fake.h"
#include "exec_run.h"
#include "harness.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "dev/dev.h"
#include "model/model.h"
#include "moe/executor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)

static struct threadpool *pool;

struct oracle_file {
    const char *model, *ids, *logits; /* logits: llama.cpp's for the ids as one batch */
};

static const struct oracle_file files[] = {
    { "models/qwen3moe-o1-Q4_K_M.gguf", "logits/ids-a.txt", "logits/o1-Q4_K_M.ids-a.f32" },
    { "models/qwen3moe-o1-Q8_0.gguf", "logits/ids-b.txt", "logits/o1-Q8_0.ids-b.f32" },
    { "lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf", "lfm2moe-o2/logits/ids-a.txt",
      "lfm2moe-o2/logits/o2-Q4_K_M.ids-a.f32" },
    { "qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf", "qwen35moe-o3/logits/ids-b.txt",
      "qwen35moe-o3/logits/o3-Q4_K_M.ids-b.f32" },
};

static struct exec_run run(struct model *m, const struct moe_exec_options *o, const int32_t *ids, int n) {
    struct exec_run_params p = { .pool = pool, .n_ctx = 128, .n_batch = 64, .kv_type = KV_F16, .steps = 8 };
    return exec_run(m, o, &p, ids, n);
}

/* A run's logits against llama.cpp's for the same file and ids, held to
 * the tolerance the oracle tests hold the CPU path to for quantized types
 * (argmax >= 0.85, mean KL <= 0.05, median max|diff| <= 0.6); the CPU
 * path's own measures are printed beside them. */
static void check_close(const char *what, const float *llama, const struct exec_run *base, const struct exec_run *r,
                        int n, int V) {
    struct logit_measures cpu = compare_logits(llama, base->logits, n, V);
    struct logit_measures dev = compare_logits(llama, r->logits, n, V);
    printf("%s vs llama.cpp: argmax %.3f / %.3f, mean KL %.5f / %.5f, median max|diff| %.4f / %.4f (cpu / cuda)\n", what,
           cpu.argmax_agree, dev.argmax_agree, cpu.mean_kl, dev.mean_kl, cpu.median_maxdiff, dev.median_maxdiff);
    CHECKF(dev.argmax_agree >= 0.85 && dev.mean_kl <= 0.05 && dev.median_maxdiff <= 0.6,
           "%s: argmax agreement %.3f, mean KL %.5f, median max|diff| %.4f", what, dev.argmax_agree, dev.mean_kl,
           dev.median_maxdiff);
}

/* One oracle file through the executor on the fake layer (gpu false: its
 * allocations checked, a fault injected) or on the GPU. */
static void test_file(const struct oracle_file *f, bool gpu) {
    struct model *m = model_load(oracle_path(f->model));
    CHECKF(m != NULL, "%s: %s", f->model, moex_error());
    if (!m) return;
    int32_t ids[64];
    int n = read_ids_file(oracle_path(f->ids), ids, 64);
    CHECK(n == 64);
    int V = m->hp.n_vocab;
    size_t bytes = 0;
    float *llama = read_whole_file(oracle_path(f->logits), &bytes);
    /* rows for at least these ids (a longer list's first rows are theirs: the model is causal) */
    CHECKF(llama && bytes >= sizeof(float) * (size_t)n * (size_t)V, "%s: %zu bytes", f->logits, bytes);
    if (!llama || bytes < sizeof(float) * (size_t)n * (size_t)V) {
        free(llama);
        model_free(m);
        return;
    }
    const struct moe_layer_desc *L0 = &m->moe.layers[0];
    uint64_t routed_pre = (uint64_t)n * L0->n_used * m->moe.n_layers, routed_dec = 8ull * L0->n_used * m->moe.n_layers;

    struct moe_exec_options none = { 0 };
    struct exec_run base = run(m, &none, ids, n);
    CHECK(base.ok && base.pre.rows_device == 0);

    /* Every expert resident: every routed row on the GPU, decode included. */
    const char *layer = gpu ? "GPU" : "fake";
    fake_reset(4096 * MIB);
    struct moe_exec_options all = { .device = "cuda", .hot_fraction = 1.0, .pinned_share = -1 };
    struct exec_run full = run(m, &all, ids, n);
    CHECKF(full.ok && full.note[0] == 0, "%s (%s): note '%s'", f->model, layer, full.note);
    CHECKF(full.pre.rows_device == routed_pre && full.pre.rows_cpu == 0 && full.dec.rows_device == routed_dec &&
               full.dec.rows_cpu == 0,
           "%s: prefill rows %llu/%llu, decode %llu/%llu on the device", f->model,
           (unsigned long long)full.pre.rows_device, (unsigned long long)routed_pre,
           (unsigned long long)full.dec.rows_device, (unsigned long long)routed_dec);
    CHECKF(full.slots == m->moe.n_layers * L0->n_expert && full.pinned == full.slots, "%s: slots %d pinned %d resident %llu staging %llu backbone %llu",
           f->model, full.slots, full.pinned, (unsigned long long)full.resident, (unsigned long long)full.staging, (unsigned long long)full.backbone);
    CHECK(full.backbone > 0); /* the dense matmuls of taken types are resident too */
    CHECKF(gpu || (F.peak <= full.resident && F.n_allocs == 0 && F.pinned == 0 && F.bad == 0),
           "%s: fake peak %llu, resident %llu, allocations left %d, pinned left %d, bad %d", f->model,
           (unsigned long long)F.peak, (unsigned long long)full.resident, F.n_allocs, F.pinned, F.bad);
    /* two submissions a layer (gate+up, down), each at most three launches */
    CHECK(full.pre.submissions == 2ull * (uint64_t)m->moe.n_layers);
    CHECKF(strstr(full.summary, "device cuda: the budget of") && strstr(full.summary, "experts (100%)"), "%s",
           full.summary);
    char what[160];
    snprintf(what, sizeof what, "%s (%s)", f->model, layer);
    check_close(what, llama, &base, &full, n, V);
    if (full.ok) free(full.logits);

    /* A pack file is not a block device's business: said, not refused. */
    if (!gpu) {
        fake_reset(4096 * MIB);
        struct moe_exec_options packed = all;
        packed.pack_path = "/nonexistent/model.mxpk";
        struct exec_run p = run(m, &packed, ids, n);
        CHECKF(p.ok && p.report.status == 0 && p.pre.rows_cpu == 0 && p.note[0] == 0 &&
                   strstr(p.summary, "pack file /nonexistent/model.mxpk not used"),
               "%s: note '%s', summary '%s', pack status %d", f->model, p.note, p.summary, p.report.status);
        if (p.ok) free(p.logits);
    }

    /* A third of the experts: a budget in bytes, as a user gives it. */
    fake_reset(4096 * MIB);
    struct moe_exec_options third = { .device = "cuda", .hot_fraction = 1.0 / 3.0, .pinned_share = -1 };
    struct exec_run part = run(m, &third, ids, n);
    CHECKF(part.ok && part.slots > 0 && part.slots < m->moe.n_layers * L0->n_expert, "%s: %d slots (%s)", f->model,
           part.slots, part.note);
    CHECK(part.pre.rows_device > 0 && part.pre.rows_device + part.pre.rows_cpu == routed_pre);
    CHECKF((gpu || F.peak <= part.resident) && part.resident < full.resident, "%s: fake peak %llu, resident %llu of %llu",
           f->model, (unsigned long long)F.peak, (unsigned long long)part.resident, (unsigned long long)full.resident);
    snprintf(what, sizeof what, "%s (%s), a third resident", f->model, layer);
    check_close(what, llama, &base, &part, n, V);
    if (part.ok) free(part.logits);

    /* A fault on the 5th launch: that layer's device share and everything
     * after run on the CPU, the reason kept. */
    if (gpu) goto done;
    fake_reset(4096 * MIB);
    F.fail_launch = 5;
    struct exec_run fault = run(m, &all, ids, n);
    CHECKF(fault.ok && strstr(fault.note, "device error") && strstr(fault.note, "injected failure of launch 5"),
           "%s: note '%s'", f->model, fault.note);
    CHECK(fault.pre.fallbacks + fault.dense_fallbacks == 1 && fault.dec.rows_device == 0 &&
          exec_run_dense_dev(&fault, MOE_DECODE) == 0);
    CHECK(F.n_allocs == 0 && F.pinned == 0);
    snprintf(what, sizeof what, "%s, a fault at launch 5", f->model);
    check_close(what, llama, &base, &fault, n, V);
    if (fault.ok) free(fault.logits);
done:
    if (base.ok) free(base.logits);
    free(llama);
    model_free(m);
}

/* Slot sizes on a block device. The Q4_K_M file's down matrices are Q6_K
 * in some layers, Q4_K in others, gate and up Q4_K: the slot type (the
 * widest, for the backbone's slots) is Q6_K, and each expert matrix gets
 * slots of its own size, so an expert takes its bytes, not three Q6_K
 * slots, and a byte budget holds more of them. A pool of sized slots
 * refuses a weight over its slot and takes it in a larger one. */
static void test_slots(void) {
    struct model *m = model_load(oracle_path("models/qwen3moe-o1-Q4_K_M.gguf"));
    CHECK(m != NULL);
    if (!m) return;
    fake_reset(4096 * MIB);
    struct dev *d = NULL;
    CHECK(dev_open_blocks("cuda", NULL, 0, &d) == DEV_OK);
    if (!d) { model_free(m); return; }
    const struct moe_layer_desc *L0 = &m->moe.layers[0];
    int64_t E = L0->n_embd, FF = L0->n_ff, values = E * FF;
    CHECK(moe_plan_slot_type(&m->moe, dev_caps(d)) == QT_Q6_K);
    CHECK(dev_set_slot_type(d, QT_Q6_K) == DEV_OK);
    CHECK(dev_caps_slot_code_bytes(dev_caps(d), values) == quant_row_size(QT_Q6_K, values));
    CHECK(dev_set_slot_type(d, QT_F16) == DEV_E_TYPE);
    struct moe_exec_options o = { .device = "cuda", .hot_fraction = 1.0, .pinned_share = -1 };
    struct moe_device_plan dp;
    CHECK(moe_plan_for_device(&m->moe, &o, dev_caps(d), &dp) == 0);
    const uint64_t role[MATS] = { dp.role_bytes[0], dp.role_bytes[1], dp.role_bytes[2] };
    CHECKF(role[0] == quant_row_size(QT_Q4_K, E) * FF && role[1] == role[0] &&
               role[2] == quant_row_size(QT_Q6_K, FF) * E,
           "role bytes %llu %llu %llu", (unsigned long long)role[0], (unsigned long long)role[1],
           (unsigned long long)role[2]);
    /* the plan prices an expert at its bytes, and a budget of five experts
     * in Q6_K-sized slots holds more than five */
    CHECK(dp.expert_bytes == role[0] + role[1] + role[2] && dp.plan.n_slots == 16);
    uint64_t uniform = 3 * dev_caps_slot_code_bytes(dev_caps(d), values);
    o.hot_fraction = 0;
    o.hot_budget = dp.staging_bytes + dp.backbone_bytes + 5 * uniform + (2u << 20);
    moe_device_plan_free(&dp);
    CHECK(moe_plan_for_device(&m->moe, &o, dev_caps(d), &dp) == 0);
    CHECKF(dp.plan.n_slots > 5 && (uint64_t)dp.plan.n_slots >= 5 * uniform / dp.expert_bytes,
           "%d experts in a budget of five Q6_K-slotted ones", dp.plan.n_slots);
    moe_device_plan_free(&dp);
    /* a pool of sized slots */
    const uint64_t sizes[3] = { quant_row_size(QT_Q4_K, E) * 64, 100, quant_row_size(QT_Q6_K, E) * 64 };
    CHECK(dev_pool_alloc_sized(d, 3, sizes, values, (int)(E > FF ? E : FF)) == DEV_OK);
    size_t q6 = quant_row_size(QT_Q6_K, E) * 64;
    uint8_t *w = calloc(1, q6);
    CHECK(w && dev_pack(d, 0, QT_Q6_K, w, (int)E, 64) == DEV_E_SHAPE);
    CHECK(w && dev_pack(d, 2, QT_Q6_K, w, (int)E, 64) == DEV_OK);
    CHECK(w && dev_pack(d, 0, QT_Q4_K, w, (int)E, 64) == DEV_OK);
    struct dev_counters c;
    dev_get_counters(d, &c);
    CHECK(c.resident_bytes - c.staging_bytes == 2u << 20); /* 64+64-rounded sizes in one 2 MiB granule */
    free(w);
    dev_close(d);
    struct dev *cpu = NULL;
    CHECK(dev_open("cpu", NULL, &cpu) == DEV_OK);
    CHECK(cpu && dev_pool_alloc_sized(cpu, 3, sizes, values, 256) == DEV_E_ARG);
    dev_close(cpu);
    model_free(m);
}

int main(void) {
    cuda_layer_override(&fake_layer);
    pool = threadpool_new(2, false);
    test_slots();
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) test_file(&files[i], false);
    /* The same on a GPU where there is one (the logits, the rows' placement). */
    cuda_layer_override(NULL);
    struct dev *d = NULL;
    if (dev_open_blocks("cuda", NULL, 0, &d) == DEV_OK) {
        printf("%s\n", dev_caps(d)->description);
        dev_close(d);
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) test_file(&files[i], true);
    } else {
        printf("the executor on a GPU: not here (%s); the fake layer stood for one\n", moex_error());
    }
    threadpool_free(pool);
    return test_finish();
}
