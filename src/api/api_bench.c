/* Benchmark figures for the public API: what a model reads per token, where
 * the time goes, the executor's per-phase counters, the machine's read
 * bandwidth. */
#include "api/api_impl.h"

#include "arch/arch.h"
#include "core/cpu.h"
#include "core/membw.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"

#include <string.h>

static uint64_t matrix_bytes(const struct matrix *w) { return (uint64_t)w->rows * w->row_bytes; }

/* Every dense matrix, the routed share of the expert stacks and one
 * embedding row (norm vectors, a few KiB, left out). */
static uint64_t decode_bytes_per_token(const struct model *m) {
    uint64_t bytes = m->token_embd.row_bytes;
    for (int i = 0; i < m->n_matrices; i++)
        if (m->matrices[i]->data != m->token_embd.data) bytes += matrix_bytes(m->matrices[i]);
    if (m->output.data == m->token_embd.data) bytes += matrix_bytes(&m->output); /* tied: all rows per token */
    for (int l = 0; l < m->moe.n_layers; l++) {
        const struct moe_layer_desc *E = &m->moe.layers[l];
        uint64_t experts = matrix_bytes(&E->gate) + matrix_bytes(&E->up) + matrix_bytes(&E->down);
        if (E->n_expert > 0) bytes += experts / (uint64_t)E->n_expert * (uint64_t)E->n_used;
    }
    return bytes;
}

void moex_model_get_info(const moex_model *mm, struct moex_model_info *out) {
    API_CHECK_VOID(out);
    memset(out, 0, sizeof *out);
    if (!mm) { api_null(__func__, "m"); return; }
    const struct model *m = mm->model;
    out->arch = m->arch ? m->arch->name : "";
    if (gguf_get_u32(m->file, "general.file_type", &out->file_type) != 0) out->file_type = UINT32_MAX;
    out->n_layers = m->hp.n_layers;
    out->n_params = m->n_params;
    out->weight_bytes = m->weight_bytes;
    out->decode_bytes = m->arch ? decode_bytes_per_token(m) : 0;
    out->n_threads = mm->pool ? threadpool_size(mm->pool) : 0;
}

void moex_context_phase_counters(const moex_context *c, enum moex_phase phase, struct moex_phase_counters *out) {
    API_CHECK_VOID(out);
    memset(out, 0, sizeof *out);
    API_CHECK_VOID(c);
    if ((unsigned)phase >= MOE_PHASES) return;
    const struct moe_phase_counters *k = moe_executor_counters(context_executor(c->ctx), (enum moe_phase)phase);
    *out = (struct moex_phase_counters){
        k->batches, k->rows_device, k->rows_cpu, k->submissions, k->jobs, k->packs, k->loads,
        k->hits, k->misses, k->admissions, k->evictions, k->fallbacks,
        k->device_ns, k->cpu_ns, k->wall_ns, k->modelled_ns,
    };
}

bool moex_context_device_modelled(const moex_context *c) {
    API_CHECK(c, false);
    return moe_executor_modelled(context_executor(c->ctx));
}

int64_t moex_context_simulated_ns(const moex_context *c, enum moex_phase phase) {
    API_CHECK(c, -1);
    if ((unsigned)phase >= MOE_PHASES) return 0;
    return moe_executor_simulation_ns(context_executor(c->ctx), (enum moe_phase)phase);
}

void moex_context_op_times(const moex_context *c, struct moex_op_times *out) {
    API_CHECK_VOID(out);
    memset(out, 0, sizeof *out);
    API_CHECK_VOID(c);
    const struct op_times *t = context_op_times(c->ctx);
    _Static_assert(OP_KINDS <= MOEX_OP_KINDS_MAX, "moex_op_times holds every kind");
    out->n = OP_KINDS;
    for (int k = 0; k < OP_KINDS; k++)
        out->op[k] = (struct moex_op_time){ op_kind_name((enum op_kind)k), op_kind_common((enum op_kind)k), t->ns[k] };
    out->barriers = threadpool_barriers(c->m->pool) - c->barriers0;
}

void moex_context_reset_op_times(moex_context *c) {
    API_CHECK_VOID(c);
    context_reset_op_times(c->ctx);
    c->barriers0 = threadpool_barriers(c->m->pool);
}

const char *moex_cpu_features(void) { return cpu_features_string(); }

int moex_measure_bandwidth(moex_model *m, int tries, struct moex_bandwidth *out) {
    API_CHECK(m, -1);
    API_CHECK(out, -1);
    if (!m->pool) return moex_errorf("%s was loaded for its tokenizer only (vocab_only)", m->path);
    struct membw_result r;
    if (api_threads_take(m, __func__)) return -1;
    int rc = membw_measure(m->pool, 0, tries, &r);
    api_threads_give(m);
    if (rc) return -1;
    *out = (struct moex_bandwidth){ r.best_gbps, r.worst_gbps, r.threads, r.tries, r.loads };
    return 0;
}
