#include "serve/serve_api.h"

#include "serve/serve_struct.h"


#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refuse(struct api_error *e, const char *param, const char *code, const char *fmt, ...) {
    e->status = 400;
    e->param = param;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* An optional number in [lo, hi]; integral when asked. */
static int get_number(const cJSON *root, const char *name, double lo, double hi, bool integral, bool *given,
                      double *out, struct api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *given = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return refuse(e, name, NULL, "'%s' must be a number", name);
    double d = v->valuedouble;
    if (integral && !(d >= lo && d <= hi && d == floor(d))) /* integers in full: 2^53 - 1, not 9.0072e+15 */
        return refuse(e, name, NULL, "'%s' must be an integer from %.0f to %.0f", name, lo, hi);
    if (!(d >= lo && d <= hi)) return refuse(e, name, NULL, "'%s' must be a number from %g to %g", name, lo, hi);
    *given = true;
    *out = d;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts, joined. */
static char *content_text(const cJSON *c, struct api_error *e) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (cJSON_IsNull(c) || !c) return strdup("");
    if (!cJSON_IsArray(c)) return refuse(e, "messages", NULL, "a message's content must be a string or an array of parts"), NULL;
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t)) return refuse(e, "messages", NULL, "only text content parts are supported"), NULL;
        len += strlen(t->valuestring);
    }
    char *out = malloc(len + 1);
    if (!out) return NULL;
    out[0] = 0;
    cJSON_ArrayForEach(part, c) strcat(out, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    return out;
}

/* The prompt text: the chat template over the messages, or "prompt". */
static char *prompt_text(const moex_model *m, const cJSON *root, bool chat, size_t *len, struct api_error *e) {
    if (!chat) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p)) return refuse(e, "prompt", NULL, "'prompt' must be a string"), NULL;
        *len = strlen(p->valuestring);
        return strdup(p->valuestring);
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    if (n == 0) return refuse(e, "messages", NULL, "'messages' must be a non-empty array"), NULL;
    struct moex_chat_message *cm = calloc((size_t)n, sizeof *cm);
    char *text = NULL;
    if (!cm) return NULL;
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool") &&
            strcmp(r, "developer")) {
            refuse(e, "messages", NULL, "message %d: 'role' must be system, user, assistant or tool", i);
            goto done;
        }
        cm[i].role = strcmp(r, "developer") ? r : "system";
        if (!(cm[i].content = content_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), e))) goto done;
        i++;
    }
    bool think = true;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
    if (cJSON_IsBool(et)) think = cJSON_IsTrue(et);
    if (!(text = serve_struct_chat_apply(m, root, cm, n, think, len))) refuse(e, "messages", NULL, "%s", moex_last_error());
done:
    for (int k = 0; k < n; k++) free((char *)cm[k].content);
    free(cm);
    return text;
}

static int parse_stop(const cJSON *root, struct serve_job *j, struct api_error *e) {
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!stop || cJSON_IsNull(stop)) return 0;
    if (cJSON_IsString(stop)) {
        if (!stop->valuestring[0]) return 0;
        return (j->stop[j->n_stop++] = strdup(stop->valuestring)) ? 0 : refuse(e, "stop", NULL, "out of memory");
    }
    if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOP)
        return refuse(e, "stop", NULL, "'stop' must be a string or an array of at most %d strings", SERVE_MAX_STOP);
    const cJSON *s;
    cJSON_ArrayForEach(s, stop) {
        if (!cJSON_IsString(s)) return refuse(e, "stop", NULL, "'stop' must hold strings");
        if (!s->valuestring[0]) continue;
        if (!(j->stop[j->n_stop++] = strdup(s->valuestring))) return refuse(e, "stop", NULL, "out of memory");
    }
    return 0;
}

int api_parse(const moex_model *m, const struct serve_options *o, int n_ctx, const char *body, size_t len,
              struct api_request *r, struct serve_job *j, struct api_error *e) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return refuse(e, NULL, NULL, "the body is not valid JSON");
    int rc = -1;
    char *text = NULL;
    if (!cJSON_IsObject(root)) { refuse(e, NULL, NULL, "the body must be a JSON object"); goto done; }
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
    if (stream && !cJSON_IsBool(stream) && !cJSON_IsNull(stream)) { refuse(e, "stream", NULL, "'stream' must be a boolean"); goto done; }
    r->stream = cJSON_IsTrue(stream);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    r->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    bool given;
    double d;
    if (get_number(root, "n", 1, 1, true, &given, &d, e)) { e->message[0] = 0; refuse(e, "n", NULL, "only n = 1 is supported"); goto done; }
    const struct serve_limits *lim = &o->limits;
    moex_sampler_params_default(&j->sampler);
    j->max_tokens = lim->max_tokens;
    if (get_number(root, "max_tokens", 1, lim->max_tokens, true, &given, &d, e)) goto done;
    if (given) j->max_tokens = (int)d;
    if (get_number(root, "max_completion_tokens", 1, lim->max_tokens, true, &given, &d, e)) goto done;
    if (given) j->max_tokens = (int)d;
    if (get_number(root, "temperature", 0, 100, false, &given, &d, e)) goto done;
    if (given) j->sampler.temperature = (float)d;
    if (get_number(root, "top_p", 0, 1, false, &given, &d, e)) goto done;
    if (given) j->sampler.top_p = (float)d;
    if (get_number(root, "top_k", 0, 1 << 24, true, &given, &d, e)) goto done;
    if (given) j->sampler.top_k = (int)d;
    if (get_number(root, "min_p", 0, 1, false, &given, &d, e)) goto done;
    if (given) j->sampler.min_p = (float)d;
    if (get_number(root, "repeat_penalty", 0.01, 100, false, &given, &d, e)) goto done;
    if (given) j->sampler.repeat_penalty = (float)d;
    if (get_number(root, "seed", 0, 9007199254740991.0, true, &given, &d, e)) goto done;
    if (given) j->sampler.seed = (uint64_t)d;
    if (parse_stop(root, j, e)) goto done;
    if (serve_struct_parse(m, root, r->chat, j, e)) goto done;
    r->structured = j->structured;
    size_t text_len = 0;
    if (!(text = prompt_text(m, root, r->chat, &text_len, e))) {
        if (!e->message[0]) refuse(e, NULL, NULL, "out of memory");
        goto done;
    }
    j->prompt = moex_tokenize_alloc(m, text, text_len, true, true, &j->n_prompt);
    if (!j->prompt) { refuse(e, NULL, NULL, "%s", moex_last_error()); goto done; }
    int most = lim->max_prompt_tokens < n_ctx ? lim->max_prompt_tokens : n_ctx;
    if (j->n_prompt > most) {
        refuse(e, r->chat ? "messages" : "prompt", "context_length_exceeded",
               "the prompt is %d tokens, more than the %d this server takes (%s)", j->n_prompt, most,
               most == n_ctx ? "--ctx" : "--max-prompt-tokens");
        goto done;
    }
    if (j->n_prompt == 0) { refuse(e, "prompt", NULL, "the prompt has no tokens"); goto done; }
    rc = 0;
done:
    free(text);
    cJSON_Delete(root);
    return rc;
}

static char *print_free(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *api_error_json(const struct api_error *e) {
    static const struct { int status; const char *type; } types[] = {
        { 401, "authentication_error" }, { 403, "permission_error" }, { 404, "not_found_error" },
        { 429, "rate_limit_error" },     { 500, "server_error" },     { 503, "server_error" },
    };
    const char *type = "invalid_request_error";
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].status == e->status) type = types[i].type;
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", type);
    if (e->param) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    if (e->code) cJSON_AddStringToObject(err, "code", e->code);
    else cJSON_AddNullToObject(err, "code");
    return print_free(root);
}

static cJSON *head(const struct api_request *r, const char *id, long created, const char *model, bool chunk) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", r->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                    : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)created);
    cJSON_AddStringToObject(root, "model", model);
    return root;
}

/* choices: [{"index": 0, ...}]: the one choice (n = 1). */
static cJSON *first_choice(cJSON *root) {
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    return choice;
}

static void add_string_n(cJSON *o, const char *name, const char *s, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy) return;
    memcpy(copy, s, len);
    copy[len] = 0;
    cJSON_AddStringToObject(o, name, copy);
    free(copy);
}

static void add_usage(cJSON *root, const struct serve_job *j) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_generated);
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", j->n_reused);
}

char *api_completion_json(const struct api_request *r, const char *id, long created, const char *model,
                          const struct serve_job *j) {
    cJSON *root = head(r, id, created, model, false);
    cJSON *choice = first_choice(root);
    if (r->chat) {
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        add_string_n(msg, "content", j->text ? j->text : "", j->len);
    } else {
        add_string_n(choice, "text", j->text ? j->text : "", j->len);
        cJSON_AddNullToObject(choice, "logprobs");
    }
    cJSON_AddStringToObject(choice, "finish_reason", j->finish);
    if (r->chat) serve_struct_message(j->structured, choice, j->text, j->len);
    add_usage(root, j);
    return print_free(root);
}

static char *event(cJSON *root) {
    char *json = print_free(root);
    if (!json) return NULL;
    size_t n = strlen(json) + 9;
    char *ev = malloc(n);
    if (ev) snprintf(ev, n, "data: %s\n\n", json);
    free(json);
    return ev;
}

char *api_chunk_event(const struct api_request *r, const char *id, long created, const char *model, const char *text,
                      size_t len, const char *finish, bool role) {
    cJSON *root = head(r, id, created, model, true);
    cJSON *choice = first_choice(root);
    if (r->chat) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        if (role) cJSON_AddStringToObject(delta, "role", "assistant");
        else serve_struct_delta(r->structured, delta, &text, &len, &finish);
        if (len || role) add_string_n(delta, "content", text, len);
    } else {
        add_string_n(choice, "text", text, len);
        cJSON_AddNullToObject(choice, "logprobs");
    }
    if (finish) cJSON_AddStringToObject(choice, "finish_reason", finish);
    else cJSON_AddNullToObject(choice, "finish_reason");
    return event(root);
}

char *api_usage_event(const struct api_request *r, const char *id, long created, const char *model,
                      const struct serve_job *j) {
    cJSON *root = head(r, id, created, model, true);
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, j);
    return event(root);
}

char *api_models_json(const char *model, long created) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    cJSON_AddStringToObject(m, "id", model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "moex");
    return print_free(root);
}
