/* The planner is pure: a model description, a device's capabilities (made
 * by hand here: no device is opened), the budget and routing rates in, a
 * placement out. The staging first, the backbone in order and whole, then
 * experts; a budget over the device's windows planned for what they hold;
 * shapes outside the envelope left on the CPU; the hottest experts pinned. */
#include "harness.h"

#include "dev/dev.h"
#include "moe/plan.h"

#include <string.h>

enum { LAYERS = 4, EXPERTS = 8, EMBD = 256, FF = 128, TOP_K = 2, VOCAB = 512 };

static struct moe_layer_desc layers[LAYERS];
static struct matrix attn_q, attn_o, head;
static struct dense_desc dense[3];

static struct moe_model_desc model(void) {
    for (int l = 0; l < LAYERS; l++) {
        layers[l] = (struct moe_layer_desc){ .layer = l, .n_expert = EXPERTS, .n_used = TOP_K, .n_ff = FF,
                                             .n_embd = EMBD };
        layers[l].gate = layers[l].up = (struct matrix){ NULL, QT_Q4_K, (int64_t)EXPERTS * FF, EMBD, 144, NULL };
        layers[l].down = (struct matrix){ NULL, QT_Q4_K, (int64_t)EXPERTS * EMBD, FF, 72, NULL };
    }
    attn_q = (struct matrix){ NULL, QT_Q4_K, 512, EMBD, 144, NULL };
    attn_o = (struct matrix){ NULL, QT_Q4_K, EMBD, 512, 288, NULL };
    head = (struct matrix){ NULL, QT_Q4_K, VOCAB, EMBD, 144, NULL };
    dense[0] = (struct dense_desc){ DENSE_ATTN_Q, 0, &attn_q };
    dense[1] = (struct dense_desc){ DENSE_ATTN_O, 0, &attn_o };
    dense[2] = (struct dense_desc){ DENSE_LM_HEAD, -1, &head };
    return (struct moe_model_desc){ LAYERS, layers, NULL, 3, dense };
}

static struct dev_caps caps(void) {
    return (struct dev_caps){ .name = "test", .compute = DEV_COMPUTE_W8A8, .layout = PACK_ROWS, .min_m = 4,
                              .k_multiple = 32, .n_multiple = 32, .k_max = PACK_MAX_K, .n_max = 1 << 20,
                              .max_jobs = 64, .mem_granule = 4096 };
}

static int dense_slots(const struct dev_caps *c, int64_t values, int max_n) {
    int all = 0, rows;
    for (int i = 0; i < 3; i++) all += dense_geometry(c, values, max_n, dense[i].w, &rows);
    return all;
}

int main(void) {
    struct moe_model_desc d = model();
    struct dev_caps c = caps();
    const int64_t values = (int64_t)EMBD * FF;
    const uint64_t staging = moe_stage_layout(&c, EMBD, FF, TOP_K).total;
    const int backbone = dense_slots(&c, values, EMBD);
    CHECK(staging > 0 && backbone == 4 + 4 + 4); /* slots of 256 x 128 values: 128 rows of K 256, 64 of K 512 */

    /* 1. A share of 100%: every expert, the staging and the whole backbone. */
    struct moe_device_plan p;
    struct moe_plan_input in = { &d, &c, 0, 1.0, false, NULL, 0, -1 };
    CHECK(moe_plan(&in, &p) == 0);
    CHECK(!strcmp(p.device, "test") && p.plan.n_slots == LAYERS * EXPERTS && p.backbone_slots == backbone);
    CHECK(p.budget_bytes == staging + dev_caps_pool_bytes(&c, backbone + 3 * LAYERS * EXPERTS, values, EMBD));
    CHECK(p.plan.n_pinned == LAYERS * EXPERTS); /* a budget that holds every expert pins them all */
    CHECK(p.note[0] == 0);
    moe_device_plan_free(&p);

    /* 2. Bytes: the staging, then the backbone whole, then five experts. */
    in.hot_fraction = 0;
    in.hot_budget = staging + dev_caps_pool_bytes(&c, backbone + 3 * 5, values, EMBD);
    CHECK(moe_plan(&in, &p) == 0);
    CHECKF(p.plan.n_slots == 5 && p.backbone_slots == backbone, "%d experts, %d backbone slots", p.plan.n_slots,
           p.backbone_slots);
    CHECK(p.dense_slot[0] == 0 && p.dense_slot[1] == 4 && p.dense_slot[2] == 8);
    moe_device_plan_free(&p);

    /* 3. Room for the first dense matmul only: the backbone stays in order, each whole. */
    in.hot_budget = staging + dev_caps_pool_bytes(&c, 5, values, EMBD);
    CHECK(moe_plan(&in, &p) == 0);
    CHECK(p.dense_slot[0] == 0 && p.dense_slot[1] == -1 && p.dense_slot[2] == -1 && p.plan.n_slots == 0);
    moe_device_plan_free(&p);

    /* 4. Less than the staging: nothing resident, and the note says why. */
    in.hot_budget = staging / 2;
    CHECK(moe_plan(&in, &p) == 0 && p.device[0] == 0 && strstr(p.note, "holds no expert"));

    /* 5. Windows: 100% of the experts over one small window is planned for
     * what the window holds (less a margin), with a note, not refused. */
    struct dev_caps w = c;
    w.windows = (struct dev_window_caps){ 1, 4u << 20 };
    in = (struct moe_plan_input){ &d, &w, 0, 1.0, false, NULL, 0, -1 };
    CHECK(moe_plan(&in, &p) == 0);
    CHECKF(p.device[0] && p.budget_bytes <= w.windows.bytes && p.plan.n_slots > 0 &&
               p.plan.n_slots < LAYERS * EXPERTS && strstr(p.note, "window"),
           "budget %llu, %d slots, note '%s'", (unsigned long long)p.budget_bytes, p.plan.n_slots, p.note);
    moe_device_plan_free(&p);
    w.windows.count = 2; /* two windows hold it all */
    CHECK(moe_plan(&in, &p) == 0 && p.plan.n_slots == LAYERS * EXPERTS && p.note[0] == 0);
    moe_device_plan_free(&p);

    /* 6. Outside the envelope (K % 96): experts stay on the CPU by rule. */
    struct dev_caps e = c;
    e.k_multiple = 96;
    in = (struct moe_plan_input){ &d, &e, 0, 1.0, false, NULL, 0, -1 };
    CHECK(moe_plan(&in, &p) == 0 && p.plan.n_slots == 0 && strstr(p.note, "envelope"));
    moe_device_plan_free(&p);

    /* 7. Rates: with room for half the experts and a pinned share of 1,
     * the pinned ones are the hottest, hottest first. */
    double rates[LAYERS * EXPERTS];
    for (int k = 0; k < LAYERS * EXPERTS; k++) rates[k] = (double)((k * 7) % (LAYERS * EXPERTS)) + 0.5;
    in = (struct moe_plan_input){ &d, &c, 0, 0.5, true, rates, 1, 1.0 };
    CHECK(moe_plan(&in, &p) == 0 && p.backbone_slots == 0 && p.plan.n_slots == LAYERS * EXPERTS / 2);
    CHECK(p.plan.n_pinned == p.plan.n_slots);
    bool ordered = true;
    for (int i = 1; i < p.plan.n_pinned; i++) ordered = ordered && rates[p.plan.pinned[i - 1]] >= rates[p.plan.pinned[i]];
    double coldest_pinned = rates[p.plan.pinned[p.plan.n_pinned - 1]];
    int hotter_left = 0;
    for (int k = 0; k < LAYERS * EXPERTS; k++) {
        bool pinned = false;
        for (int i = 0; i < p.plan.n_pinned; i++) pinned = pinned || p.plan.pinned[i] == k;
        hotter_left += !pinned && rates[k] > coldest_pinned;
    }
    CHECK(ordered && hotter_left == 0);
    moe_device_plan_free(&p);
    return test_finish();
}
