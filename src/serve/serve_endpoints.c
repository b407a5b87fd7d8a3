#include "serve/serve_endpoints.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *print_free(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *refused(struct api_error *e, const char *param, const char *message) {
    e->status = 400;
    e->param = param;
    snprintf(e->message, sizeof e->message, "%s", message);
    return NULL;
}

char *endpoint_health(const struct serve_health *h, bool strict, int *status) {
    cJSON *root = cJSON_CreateObject();
    const char *state = !h->ready ? "loading" : h->busy == h->slots && h->queued > 0 ? "busy" : "ok";
    *status = !h->ready || (strict && strcmp(state, "ok")) ? 503 : 200;
    cJSON_AddStringToObject(root, "status", state);
    if (h->ready) {
        cJSON_AddNumberToObject(root, "slots_idle", h->slots - h->busy);
        cJSON_AddNumberToObject(root, "slots_processing", h->busy);
        cJSON_AddNumberToObject(root, "queued", h->queued);
    }
    return print_free(root);
}

static cJSON *parse_object(const char *body, size_t len, struct api_error *e) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        refused(e, NULL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* {"content": text, "add_special": false, "parse_special": true, "with_pieces": false}
 * -> {"tokens": [ids]} or {"tokens": [{"id", "piece"}]}. */
char *endpoint_tokenize(const moex_model *m, const char *body, size_t len, struct api_error *e) {
    if (memchr(body, 0, len)) return refused(e, NULL, "the body holds a NUL byte");
    cJSON *root = parse_object(body, len, e);
    if (!root) return NULL;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!cJSON_IsString(content)) { cJSON_Delete(root); return refused(e, "content", "'content' must be a string"); }
    if (strstr(body, "\\u0000")) { cJSON_Delete(root); return refused(e, "content", "'content' holds U+0000 (NUL)"); }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "parse_special");
    bool add_special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "add_special"));
    bool parse_special = !cJSON_IsFalse(ps);
    bool pieces = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "with_pieces"));
    int n = 0;
    int32_t *ids = moex_tokenize_alloc(m, content->valuestring, strlen(content->valuestring), add_special, parse_special, &n);
    cJSON_Delete(root);
    if (!ids) return refused(e, "content", moex_last_error());
    cJSON *out = cJSON_CreateObject(), *tokens = cJSON_AddArrayToObject(out, "tokens");
    for (int i = 0; i < n; i++) {
        if (!pieces) { cJSON_AddItemToArray(tokens, cJSON_CreateNumber(ids[i])); continue; }
        size_t plen = 0;
        const char *piece = moex_token_piece(m, ids[i], &plen);
        char *copy = malloc(plen + 1);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        if (copy) {
            memcpy(copy, piece ? piece : "", plen);
            copy[plen] = 0;
            cJSON_AddStringToObject(t, "piece", copy);
        }
        free(copy);
        cJSON_AddItemToArray(tokens, t);
    }
    free(ids);
    return print_free(out);
}

/* {"tokens": [ids]} -> {"content": text}. */
char *endpoint_detokenize(const moex_model *m, const char *body, size_t len, struct api_error *e) {
    cJSON *root = parse_object(body, len, e);
    if (!root) return NULL;
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(tokens)) { cJSON_Delete(root); return refused(e, "tokens", "'tokens' must be an array of token ids"); }
    int n = cJSON_GetArraySize(tokens), n_vocab = moex_model_n_vocab(m), k = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids) { cJSON_Delete(root); return NULL; }
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab && d == floor(d))) {
            free(ids);
            cJSON_Delete(root);
            return refused(e, "tokens", "'tokens' must hold token ids of this model");
        }
        ids[k++] = (int32_t)d;
    }
    cJSON_Delete(root);
    size_t text_len = 0;
    char *text = moex_detokenize(m, ids, n, &text_len);
    free(ids);
    if (!text) return refused(e, "tokens", moex_last_error());
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "content", text); /* the text of ids that decode to NUL is cut there */
    free(text);
    return print_free(out);
}

static cJSON *params_json(const struct moex_sampler_params *p, int n_predict) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "temperature", p->temperature);
    cJSON_AddNumberToObject(o, "top_k", p->top_k);
    cJSON_AddNumberToObject(o, "top_p", p->top_p);
    cJSON_AddNumberToObject(o, "min_p", p->min_p);
    cJSON_AddNumberToObject(o, "repeat_penalty", p->repeat_penalty);
    cJSON_AddNumberToObject(o, "repeat_last_n", p->repeat_last_n);
    cJSON_AddNumberToObject(o, "seed", (double)p->seed);
    cJSON_AddNumberToObject(o, "n_predict", n_predict);
    return o;
}

char *endpoint_props(const moex_model *m, const struct serve_options *o, int n_ctx) {
    struct moex_sampler_params p;
    moex_sampler_params_default(&p);
    cJSON *root = cJSON_CreateObject();
    cJSON *dgs = cJSON_AddObjectToObject(root, "default_generation_settings");
    cJSON_AddNumberToObject(dgs, "n_ctx", n_ctx);
    cJSON_AddItemToObject(dgs, "params", params_json(&p, o->limits.max_tokens));
    cJSON_AddNumberToObject(root, "total_slots", o->parallel);
    cJSON_AddStringToObject(root, "model_alias", o->model_id ? o->model_id : moex_model_name(m));
    cJSON_AddStringToObject(root, "model_arch", moex_model_arch(m));
    cJSON_AddBoolToObject(root, "chat_template_known", moex_chat_template_known(m));
    cJSON_AddItemToObject(cJSON_AddObjectToObject(root, "modalities"), "vision", cJSON_CreateFalse());
    char build[64];
    snprintf(build, sizeof build, "moex %s", moex_version());
    cJSON_AddStringToObject(root, "build_info", build);
    return print_free(root);
}

char *endpoint_slots(const struct sched_slot *slots, int n, int n_ctx) {
    cJSON *root = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        const struct sched_slot *s = &slots[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddNumberToObject(o, "n_ctx", n_ctx);
        cJSON_AddBoolToObject(o, "is_processing", s->busy);
        if (s->busy) {
            cJSON_AddItemToObject(o, "params", params_json(&s->sampler, s->max_tokens));
            cJSON_AddNumberToObject(o, "n_prompt_tokens", s->n_prompt);
            cJSON *next = cJSON_AddObjectToObject(o, "next_token");
            cJSON_AddNumberToObject(next, "n_decoded", s->n_generated);
            cJSON_AddNumberToObject(next, "n_remain", s->max_tokens - s->n_generated);
        }
        cJSON_AddItemToArray(root, o);
    }
    return print_free(root);
}
