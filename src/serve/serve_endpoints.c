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
    char seed[24]; /* in full (cJSON prints doubles near 2^53 with 15 digits) */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    cJSON_AddRawToObject(o, "seed", seed);
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

/* ---- /v1/embeddings. */

/* One input's tokens: a string, or an array of token ids. */
static int32_t *embed_input(const moex_model *m, const cJSON *in, int *n, struct api_error *e) {
    if (cJSON_IsString(in)) {
        int32_t *ids = moex_tokenize_alloc(m, in->valuestring, strlen(in->valuestring), true, false, n);
        if (!ids) refused(e, "input", moex_last_error());
        return ids;
    }
    int k = 0, count = cJSON_GetArraySize(in), n_vocab = moex_model_n_vocab(m);
    int32_t *ids = malloc(sizeof *ids * (size_t)(count ? count : 1));
    if (!ids) return refused(e, NULL, "out of memory"), NULL;
    const cJSON *t;
    cJSON_ArrayForEach(t, in) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab && d == floor(d))) {
            free(ids);
            return refused(e, "input", "'input' token ids must be integers of this model's vocabulary"), NULL;
        }
        ids[k++] = (int32_t)d;
    }
    *n = k;
    return ids;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The little-endian float32 bytes of v in base64 (OpenAI's encoding_format "base64"). */
static char *base64_floats(const float *v, int n) {
    size_t len = (size_t)n * 4, out_len = 4 * ((len + 2) / 3);
    const unsigned char *p = (const unsigned char *)v;
    char *out = malloc(out_len + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        unsigned a = p[i], b = i + 1 < len ? p[i + 1] : 0, c = i + 2 < len ? p[i + 2] : 0;
        *o++ = b64[a >> 2];
        *o++ = b64[((a & 3) << 4) | (b >> 4)];
        *o++ = i + 1 < len ? b64[((b & 15) << 2) | (c >> 6)] : '=';
        *o++ = i + 2 < len ? b64[c & 63] : '=';
    }
    *o = 0;
    return out;
}

char *endpoint_embeddings(moex_model *m, moex_context *ctx, const char *model_id, const char *body, size_t len,
                          struct api_error *e) {
    if (memchr(body, 0, len) || strstr(body, "\\u0000")) return refused(e, "input", "the input holds U+0000 (NUL)");
    cJSON *root = parse_object(body, len, e);
    if (!root) return NULL;
    char *result = NULL;
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    int D = moex_model_n_embd(m);
    bool base64 = cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64");
    if (fmt && !cJSON_IsNull(fmt) && !(cJSON_IsString(fmt) && (base64 || !strcmp(fmt->valuestring, "float")))) {
        refused(e, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        goto done;
    }
    if (dims && !cJSON_IsNull(dims) && !(cJSON_IsNumber(dims) && dims->valuedouble == D)) {
        e->status = 400;
        e->param = "dimensions";
        snprintf(e->message, sizeof e->message, "'dimensions': this model's embeddings have %d", D);
        goto done;
    }
    /* A string or an array of token ids is one input; an array of strings or of id arrays, several. */
    bool many = cJSON_IsArray(input) && cJSON_GetArraySize(input) > 0 && !cJSON_IsNumber(cJSON_GetArrayItem(input, 0));
    if (!(cJSON_IsString(input) || (cJSON_IsArray(input) && cJSON_GetArraySize(input) > 0))) {
        refused(e, "input", "'input' must be a string, an array of strings, or token ids");
        goto done;
    }
    cJSON *out = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(out, "data");
    float *v = malloc(sizeof *v * (size_t)D);
    int total = 0, index = 0;
    const cJSON *one = many ? input->child : input;
    for (; one && v; one = many ? one->next : NULL, index++) {
        if (many && !cJSON_IsString(one) && !cJSON_IsArray(one)) { refused(e, "input", "each input must be a string or token ids"); break; }
        int n = 0;
        int32_t *ids = embed_input(m, one, &n, e);
        if (!ids) break;
        if (n == 0 || moex_embed(ctx, ids, n, v)) {
            free(ids);
            refused(e, "input", n == 0 ? "an input has no tokens" : moex_last_error());
            break;
        }
        free(ids);
        total += n;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "object", "embedding");
        cJSON_AddNumberToObject(item, "index", index);
        if (base64) {
            char *s = base64_floats(v, D);
            cJSON_AddStringToObject(item, "embedding", s ? s : "");
            free(s);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(item, "embedding");
            for (int d = 0; d < D; d++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(v[d]));
        }
        cJSON_AddItemToArray(data, item);
    }
    free(v);
    if (e->status) { cJSON_Delete(out); goto done; }
    cJSON_AddStringToObject(out, "object", "list");
    cJSON_AddStringToObject(out, "model", model_id);
    cJSON *usage = cJSON_AddObjectToObject(out, "usage");
    cJSON_AddNumberToObject(usage, "prompt_tokens", total);
    cJSON_AddNumberToObject(usage, "total_tokens", total);
    result = print_free(out);
done:
    cJSON_Delete(root);
    return result;
}
