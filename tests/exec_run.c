#include "exec_run.h"

#include "harness.h"

#include "core/error.h"
#include "dev/dev.h"
#include "dev/sim.h"
#include "moe/executor_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct exec_run exec_run(struct model *m, const struct moe_exec_options *o, const struct exec_run_params *p,
                         const int32_t *ids, int n_ids) {
    struct exec_run r;
    memset(&r, 0, sizeof r);
    struct context_params cp = { .n_ctx = p->n_ctx, .n_batch = p->n_batch, .kv_type = p->kv_type, .pool = p->pool,
                                 .experts = o };
    struct context *c = context_new(m, &cp);
    if (!c) {
        fprintf(stderr, "context: %s\n", moex_error());
        return r;
    }
    int V = m->hp.n_vocab;
    r.logits = calloc((size_t)n_ids * V, sizeof(float));
    float *last = malloc(sizeof(float) * V);
    r.ok = r.logits && last && p->steps <= EXEC_RUN_MAX_STEPS && context_eval(c, ids, n_ids, r.logits, true) == 0;
    const float *l = r.ok ? r.logits + (size_t)(n_ids - 1) * V : NULL;
    for (int s = 0; s < p->steps && r.ok; s++) {
        r.greedy[s] = test_argmax(l, V);
        r.ok = context_eval(c, &r.greedy[s], 1, last, false) == 0;
        l = last;
    }
    struct moe_executor *e = context_executor(c);
    r.pre = *moe_executor_counters(e, MOE_PREFILL);
    r.dec = *moe_executor_counters(e, MOE_DECODE);
    for (int ph = 0; ph < MOE_PHASES; ph++)
        for (int k = 0; k < DENSE_KINDS; k++) {
            const struct dense_counters *d = executor_dense_counters(e, (enum moe_phase)ph, (enum dense_kind)k);
            r.dense_dev[ph][k] = d->rows_device;
            r.dense_cpu[ph][k] = d->rows_cpu;
            r.dense_fallbacks += d->fallbacks;
        }
    r.resident = moe_executor_resident_bytes(e);
    r.staging = moe_executor_staging_bytes(e);
    r.backbone = moe_executor_backbone_bytes(e);
    struct sim *s = e->dev ? dev_sim(e->dev) : NULL;
    r.window_used = s ? sim_window_used(s) : 0;
    moe_executor_slots(e, &r.pinned, &r.slots);
    r.report = *moe_executor_pack_report(e);
    r.report.path = NULL;
    snprintf(r.note, sizeof r.note, "%s", moe_executor_note(e));
    snprintf(r.summary, sizeof r.summary, "%s", moe_executor_summary(e));
    free(last);
    context_free(c);
    return r;
}

uint64_t exec_run_dense_dev(const struct exec_run *r, enum moe_phase phase) {
    uint64_t n = 0;
    for (int k = 0; k < DENSE_KINDS; k++) n += r->dense_dev[phase][k];
    return n;
}
