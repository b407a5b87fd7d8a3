/* Sampling and the generation loop for the public API: prefill with prefix
 * reuse, then one token at a time until a stop. */
#include "api/api_impl.h"

#include "core/timer.h"
#include "model/context.h"
#include "text/sampler.h"

#include <stdlib.h>
#include <string.h>

void moex_sampler_params_default(struct moex_sampler_params *p) {
    API_CHECK_VOID(p);
    sampler_defaults(p);
}

moex_sampler *moex_sampler_new(const moex_model *m, const struct moex_sampler_params *p) {
    API_CHECK(m, NULL);
    struct moex_sampler_params defaults;
    if (!p) { moex_sampler_params_default(&defaults); p = &defaults; }
    moex_sampler *s = malloc(sizeof *s);
    if (!s) return moex_errorf("out of memory"), NULL;
    if (!(s->s = sampler_new(p, m->model->hp.n_vocab))) { free(s); return NULL; }
    s->m = m;
    return s;
}

void moex_sampler_free(moex_sampler *s) {
    if (!s) return;
    sampler_free(s->s);
    free(s);
}

void moex_sampler_accept(moex_sampler *s, int32_t id) {
    API_CHECK_VOID(s);
    sampler_accept(s->s, id);
}

int32_t api_sample(moex_sampler *s, float *logits) {
    /* the penalties rewrite the logits in place; the next eval replaces them */
    int32_t id = sampler_sample(s->s, logits);
    sampler_accept(s->s, id);
    return id;
}

int32_t moex_sample(moex_sampler *s, const moex_context *c) {
    API_CHECK(s, -1);
    if (api_enter(c, __func__)) return -1;
    int32_t id = c->have_logits ? api_sample(s, c->logits)
                                : moex_errorf("moex_sample: the context has no logits yet");
    api_leave(c);
    return id;
}

static int generate(moex_context *c, moex_sampler *s, const int32_t *prompt, int n_prompt,
                    const struct moex_generate_params *p, struct moex_generate_result *r) {
    const moex_model *m = c->m;
    moex_decoder *dec = NULL;
    if (p->on_token && m->model->tok && !(dec = moex_decoder_new(m))) return -1;
    for (int i = 0; i < n_prompt; i++) sampler_accept(s->s, prompt[i]);
    double t0 = time_s();
    int keep = n_prompt > 0 ? api_shared_prefix(c, prompt, n_prompt) : 0;
    if (keep >= n_prompt) keep = n_prompt - 1;
    int rc = 0;
    if (p->checkpoint_at > keep && p->checkpoint_at < n_prompt) rc = api_prefill(c, prompt, p->checkpoint_at);
    if (rc == 0) rc = api_prefill(c, prompt, n_prompt);
    r->n_prompt = n_prompt;
    r->n_evaluated = rc == 0 ? n_prompt - keep : 0;
    r->prompt_s = time_s() - t0;
    t0 = time_s();
    r->finish = MOEX_FINISH_LENGTH;
    const char *text = "";
    size_t len = 0;
    for (int i = 0; rc == 0 && i < p->max_tokens; i++) {
        int32_t id = api_sample(s, c->logits);
        r->n_generated++;
        bool eog = moex_token_is_eog(m, id);
        len = 0;
        if (dec && !eog && !(text = moex_decoder_put(dec, id, &len))) { rc = -1; break; }
        if (p->on_token && p->on_token(p->user, id, text, len)) { r->finish = MOEX_FINISH_CALLBACK; break; }
        if (eog && !p->ignore_eog) { r->finish = MOEX_FINISH_EOG; break; }
        if (i + 1 == p->max_tokens) break;
        if (context_n_past(c->ctx) >= context_n_ctx(c->ctx)) { r->finish = MOEX_FINISH_CONTEXT; break; }
        rc = api_eval(c, &id, 1, NULL);
    }
    r->generate_s = time_s() - t0;
    if (dec && rc == 0) {
        text = moex_decoder_flush(dec, &len);
        if (len && p->on_token) p->on_token(p->user, -1, text, len);
    }
    moex_decoder_free(dec);
    return rc;
}

int moex_generate(moex_context *c, moex_sampler *s, const int32_t *prompt, int n_prompt,
                  const struct moex_generate_params *p, struct moex_generate_result *r) {
    API_CHECK(r, -1);
    memset(r, 0, sizeof *r);
    API_CHECK(s, -1);
    if (!prompt && n_prompt > 0) return api_null(__func__, "prompt");
    API_CHECK(p, -1);
    if (api_enter(c, __func__)) return -1;
    int rc = generate(c, s, prompt, n_prompt, p, r);
    api_leave(c);
    return rc;
}
