/* Contexts for the public API: evaluation that keeps the tokens a context
 * holds, so that a new prompt evaluates only what differs (prefix reuse),
 * and the executor's counters. */
#include "api/api_impl.h"

#include "core/threadpool.h"
#include "core/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void moex_context_params_default(struct moex_context_params *p) {
    API_CHECK_VOID(p);
    memset(p, 0, sizeof *p);
}

/* The executor's start-up notes, once per model: a refused pack file with
 * the command that rebuilds it, or why the device is not used. */
static void log_notes(moex_context *c) {
    moex_model *m = c->m;
    if (m->note_said) return;
    const struct model_interleave_report *x = model_interleave_report(m->model);
    if (x && x->path[0] && !m->interleave_said) {
        m->interleave_said = true;
        if (x->refused)
            moex_log(m, MOEX_LOG_WARN, "pack file not used for the CPU's interleaved layout, %d matrices repacked at "
                     "start-up: %s. Rebuild it with: moex pack -m %s --device none -o %s (or with the device it is "
                     "for)", x->repacked, x->message, m->path, x->path);
        else if (x->repacked)
            moex_log(m, MOEX_LOG_NOTE, "%s: %d of %d matrices in the CPU's interleaved layout mapped from it, %d "
                     "repacked at start-up: %d not in it, %d in layout variant %u where this machine's kernels read "
                     "another (moex pack on this machine rebuilds it)", x->path, x->mapped, x->targets, x->repacked,
                     x->missing, x->other_variant, (unsigned)x->file_variant);
    }
    struct moe_executor *e = context_executor(c->ctx);
    const struct moe_pack_report *r = moe_executor_pack_report(e);
    const struct moe_exec_options *o = &m->experts;
    if (r->path && r->status != 0) {
        char budget[64];
        if (o->hot_fraction > 0) snprintf(budget, sizeof budget, "%g%%", o->hot_fraction * 100);
        else snprintf(budget, sizeof budget, "%llu", (unsigned long long)o->hot_budget);
        moex_log(m, MOEX_LOG_WARN, "pack file refused, experts are packed live: %s. Rebuild it with: moex pack -m %s "
                 "--device %s --hot-budget %s%s%s -o %s", r->message, m->path, moe_executor_device(e), budget,
                 o->stats_path ? " --stats " : "", o->stats_path ? o->stats_path : "", r->path);
        m->note_said = true;
        return;
    }
    if (r->path && r->message[0]) moex_log(m, MOEX_LOG_NOTE, "%s", r->message);
    if (moe_executor_note(e)[0]) {
        moex_log(m, MOEX_LOG_NOTE, "%s", moe_executor_note(e));
        m->note_said = true;
    }
}

/* The notes, then what the device's budget holds (once per model). */
static void log_start_notes(moex_context *c) {
    log_notes(c);
    const char *summary = moe_executor_summary(context_executor(c->ctx));
    if (summary[0] && !c->m->summary_said) {
        c->m->summary_said = true;
        moex_log(c->m, MOEX_LOG_NOTE, "%s", summary);
    }
}

moex_context *moex_context_new(moex_model *m, const struct moex_context_params *p) {
    API_CHECK(m, NULL);
    return api_context_new(m, p, 1);
}

moex_context *api_context_new(moex_model *m, const struct moex_context_params *p, int n_seq) {
    struct moex_context_params defaults;
    if (!p) { moex_context_params_default(&defaults); p = &defaults; }
    if (!m->model->arch) return moex_errorf("%s was loaded for its tokenizer only (vocab_only)", m->path), NULL;
    moex_context *c = calloc(1, sizeof *c);
    if (!c) return moex_errorf("out of memory"), NULL;
    c->m = m;
    atomic_init(&c->busy, false);
    c->barriers0 = threadpool_barriers(m->pool);
    struct moe_exec_options experts = m->experts;
    experts.progress = m->progress;
    experts.progress_user = m->user;
    if (p->trace) {
        if (!(c->trace = trace_new(1 << 20))) goto oom;
        experts.trace = c->trace;
    }
    if (!(c->logits = malloc(sizeof *c->logits * (size_t)m->model->hp.n_vocab))) goto oom;
    struct context_params cp = { p->n_ctx, p->n_batch, p->kv_f32 ? KV_F32 : KV_F16, m->pool, &experts, m->pack_path };
    if (api_threads_take(m, "moex_context_new")) goto fail;
    c->ctx = context_new_seqs(m->model, &cp, n_seq);
    api_threads_give(m);
    if (!c->ctx) goto fail;
    c->cap = context_n_ctx(c->ctx);
    if (!(c->tokens = malloc(sizeof *c->tokens * (size_t)c->cap))) goto oom;
    log_start_notes(c);
    return c;
oom:
    moex_errorf("out of memory");
fail:
    moex_context_free(c);
    return NULL;
}

void moex_context_free(moex_context *c) {
    if (!c) return;
    api_seqs_free(c);
    context_free(c->ctx);
    trace_free(c->trace);
    api_board_free(c);
    free(c->logits);
    free(c->tokens);
    free(c);
}

int api_enter(const moex_context *c, const char *function) {
    if (!c) return api_null(function, "c");
    if (atomic_exchange(&((moex_context *)c)->busy, true))
        return moex_errorf("%s: the context is in use by another call (a context belongs to one thread at a time)",
                           function);
    return 0;
}

void api_leave(const moex_context *c) { atomic_store(&((moex_context *)c)->busy, false); }

int api_threads_take(const moex_model *m, const char *function) {
    if (atomic_exchange(&((moex_model *)m)->threads_busy, true))
        return moex_errorf("%s: the model's threads are in use by another call (evaluation runs on one thread at a "
                           "time per model)", function);
    return 0;
}

void api_threads_give(const moex_model *m) { atomic_store(&((moex_model *)m)->threads_busy, false); }

int moex_n_ctx(const moex_context *c) {
    API_CHECK(c, -1);
    return context_n_ctx(c->ctx);
}

int moex_n_past(const moex_context *c) {
    API_CHECK(c, -1);
    return context_n_past(c->ctx);
}

const float *moex_logits(const moex_context *c) {
    API_CHECK(c, NULL);
    return c->have_logits ? c->logits : NULL;
}

/* The rule of every evaluating call (include/moex.h): one that fails keeps
 * none of its tokens, the context holds what it held at `past`, and there
 * are no logits until the next evaluation. */
static int failed(moex_context *c, int past) {
    if (context_n_past(c->ctx) > past) context_truncate(c->ctx, past);
    if (c->n_tokens > past) c->n_tokens = past;
    c->have_logits = false;
    return -1;
}

/* all_logits: (n, n_vocab) of every position, else NULL. */
int api_eval(moex_context *c, const int32_t *tokens, int n, float *all_logits) {
    int past = context_n_past(c->ctx);
    if (n < 0) return moex_errorf("%d tokens to evaluate: a count cannot be negative", n), failed(c, past);
    if (n == 0) return 0;
    if (!tokens) return api_null("moex_eval", "tokens"), failed(c, past);
    if (n > context_n_ctx(c->ctx) - past)
        return moex_errorf("%d tokens do not fit after %d in the context of %d", n, past, context_n_ctx(c->ctx)),
               failed(c, past);
    c->have_logits = false;
    if (api_threads_take(c->m, "moex_eval")) return failed(c, past);
    int rc = context_eval(c->ctx, tokens, n, all_logits ? all_logits : c->logits, all_logits != NULL);
    api_threads_give(c->m);
    if (rc != 0) return failed(c, past);
    size_t n_vocab = (size_t)c->m->model->hp.n_vocab;
    if (all_logits) memcpy(c->logits, all_logits + (size_t)(n - 1) * n_vocab, sizeof *c->logits * n_vocab);
    if (c->n_tokens == past) { /* tokens are known from the start */
        memcpy(c->tokens + past, tokens, sizeof *tokens * (size_t)n);
        c->n_tokens = past + n;
    }
    c->evaluated += (uint64_t)n;
    c->have_logits = true;
    return 0;
}

int moex_eval(moex_context *c, const int32_t *tokens, int n) {
    if (api_enter(c, __func__)) return -1;
    int rc = api_eval(c, tokens, n, NULL);
    api_leave(c);
    return rc;
}

int moex_eval_all_logits(moex_context *c, const int32_t *tokens, int n, float *logits) {
    if (api_enter(c, __func__)) return -1;
    int rc = logits ? api_eval(c, tokens, n, logits) : (api_null(__func__, "logits"), failed(c, context_n_past(c->ctx)));
    api_leave(c);
    return rc;
}

void moex_truncate(moex_context *c, int n_past) {
    if (api_enter(c, __func__)) return;
    if (n_past < 0) n_past = 0;
    if (n_past < context_n_past(c->ctx)) {
        context_truncate(c->ctx, n_past);
        if (c->n_tokens > n_past) c->n_tokens = n_past;
        c->have_logits = false;
    }
    api_leave(c);
}

int api_shared_prefix(const moex_context *c, const int32_t *tokens, int n) {
    int keep = 0, held = c->n_tokens < context_n_past(c->ctx) ? c->n_tokens : context_n_past(c->ctx);
    while (keep < held && keep < n && c->tokens[keep] == tokens[keep]) keep++;
    return keep;
}

int moex_shared_prefix(const moex_context *c, const int32_t *tokens, int n) {
    API_CHECK(c, -1);
    if (!tokens && n > 0) return api_null(__func__, "tokens");
    return api_shared_prefix(c, tokens, n);
}

int api_prefill(moex_context *c, const int32_t *tokens, int n) {
    int past = context_n_past(c->ctx), n_vocab = c->m->model->hp.n_vocab;
    if (n <= 0) return moex_errorf("the prompt has no tokens"), failed(c, past);
    if (!tokens) return api_null("moex_prefill", "tokens"), failed(c, past);
    if (n > context_n_ctx(c->ctx))
        return moex_errorf("the prompt (%d tokens) does not fit the context of %d tokens", n, context_n_ctx(c->ctx)),
               failed(c, past);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return moex_errorf("token id %d is out of range (vocabulary of %d)", tokens[i], n_vocab), failed(c, past);
    int keep = api_shared_prefix(c, tokens, n);
    if (keep == n) keep--; /* something must be evaluated to get logits */
    if (keep < past) {
        context_truncate(c->ctx, keep);
        if (c->n_tokens > keep) c->n_tokens = keep;
    }
    context_checkpoint(c->ctx); /* recurrent state comes back to here cheaply */
    return api_eval(c, tokens + keep, n - keep, NULL);
}

int moex_prefill(moex_context *c, const int32_t *tokens, int n) {
    if (api_enter(c, __func__)) return -1;
    int rc = api_prefill(c, tokens, n);
    api_leave(c);
    return rc;
}

void moex_context_counters(const moex_context *c, struct moex_counters *out) {
    API_CHECK_VOID(out);
    memset(out, 0, sizeof *out);
    API_CHECK_VOID(c);
    const struct moe_executor *e = context_executor(c->ctx);
    for (int p = 0; p < MOE_PHASES; p++) {
        const struct moe_phase_counters *k = moe_executor_counters(e, (enum moe_phase)p);
        out->rows_device += k->rows_device;
        out->rows_cpu += k->rows_cpu;
        out->hits += k->hits;
        out->misses += k->misses;
        out->fallbacks += k->fallbacks;
    }
    out->tokens = c->evaluated;
    out->resident_bytes = moe_executor_resident_bytes(e);
    out->device = moe_executor_device(e);
}

int moex_context_write_trace(const moex_context *c, const char *path) {
    API_CHECK(c, -1);
    API_CHECK(path, -1);
    if (!c->trace) return moex_errorf("the context records no timeline (moex_context_params.trace)");
    return trace_write(c->trace, path);
}

void moex_context_memory(const moex_context *c, struct moex_memory *out) {
    API_CHECK_VOID(out);
    memset(out, 0, sizeof *out);
    API_CHECK_VOID(c);
    struct context_memory mem;
    context_memory(c->ctx, &mem);
    *out = (struct moex_memory){ mem.kv, mem.conv, mem.recurrent, mem.checkpoint, mem.scratch,
                                 model_interleaved_bytes(c->m->model) };
}

char *moex_context_profile_text(const moex_context *c) {
    API_CHECK(c, NULL);
    struct api_text t;
    FILE *out = api_text_open(&t);
    if (out) moe_executor_print(context_executor(c->ctx), out);
    return api_text_close(&t, true);
}

const char *moex_context_note(const moex_context *c) {
    API_CHECK(c, NULL);
    return c->m->note_said ? "" : moe_executor_note(context_executor(c->ctx));
}
