/* moex serve's answers in the OpenAI shapes: a chat's <think> block split
 * off as reasoning_content, the completion and chat objects, their stream
 * chunks with logprobs, usage and errors. */
#include "serve/serve_api.h"

#include "serve/serve_struct.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---- A chat's <think> block. */
static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>";

/* The length of the longest end of text[from..len) that begins `tag`. */
static size_t partial_tag(const char *text, size_t from, size_t len, const char *tag) {
    size_t n = strlen(tag);
    for (size_t k = n - 1; k > 0; k--)
        if (k <= len - from && !memcmp(text + len - k, tag, k)) return k;
    return 0;
}

void api_split_think(const struct api_request *r, const char *text, size_t len, bool final, struct think_split *o) {
    *o = (struct think_split){ 0, 0, 0, len };
    if (!r->split_reasoning) return;
    size_t p = 0, n_open = strlen(THINK_OPEN), n_close = strlen(THINK_CLOSE);
    if (!r->think_open) {
        while (p < len && (text[p] == ' ' || text[p] == '\n')) p++;
        if (len - p >= n_open && !memcmp(text + p, THINK_OPEN, n_open)) p += n_open;
        else if (!final && len - p < n_open && !memcmp(text + p, THINK_OPEN, len - p)) { o->c1 = 0; return; } /* not known yet */
        else return; /* no reasoning: all of it is the answer */
    }
    while (p < len && text[p] == '\n') p++; /* the block's new lines are the template's */
    size_t end = len;
    for (size_t q = p; q + n_close <= len; q++)
        if (!memcmp(text + q, THINK_CLOSE, n_close)) { end = q; break; }
    o->r0 = p;
    if (end == len) { /* the block is still open: hold back what may begin its end */
        o->r1 = final ? len : len - partial_tag(text, p, len, THINK_CLOSE);
        o->c0 = o->c1 = len;
    } else {
        o->r1 = end;
        o->c0 = end + n_close;
        while (o->c0 < len && (text[o->c0] == '\n' || text[o->c0] == ' ')) o->c0++;
    }
    while (o->r1 > o->r0 && text[o->r1 - 1] == '\n') o->r1--;
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
    char fingerprint[64];
    snprintf(fingerprint, sizeof fingerprint, "moex-%s", moex_version());
    cJSON_AddStringToObject(root, "system_fingerprint", fingerprint);
    char seed[24]; /* as an integer in full: cJSON prints a double with 15 digits when close enough */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
    cJSON_AddRawToObject(root, "seed", seed);
    return root;
}

static cJSON *add_choice(cJSON *choices, int index) {
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, choice);
    cJSON_AddNumberToObject(choice, "index", index);
    return choice;
}

/* Bytes as a JSON string: invalid UTF-8 (a token's piece may end inside a
 * character) comes out as U+FFFD, never as bytes that are not JSON. */
static cJSON *string_n(const char *s, size_t len) {
    char *copy = malloc(3 * len + 1), *o = copy;
    if (!copy) return cJSON_CreateString("");
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++) ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && c) { memcpy(o, s + i, n); o += n; i += n; }
        else { memcpy(o, "\xEF\xBF\xBD", 3); o += 3; i++; }
    }
    *o = 0;
    cJSON *v = cJSON_CreateString(copy);
    free(copy);
    return v;
}

static void add_string_n(cJSON *o, const char *name, const char *s, size_t len) {
    cJSON_AddItemToObject(o, name, string_n(s, len));
}

static cJSON *token_bytes(const char *piece, size_t len) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < len; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)piece[i]));
    return a;
}

/* The logprobs of tokens[from, to): chat's {"content": [...]}, or the
 * completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static cJSON *logprobs_json(const moex_model *m, const struct api_request *r, const struct serve_job *j, int from,
                            int to) {
    cJSON *lp = cJSON_CreateObject();
    if (r->chat) {
        cJSON *content = cJSON_AddArrayToObject(lp, "content");
        for (int i = from; i < to; i++) {
            const struct serve_token *t = &j->tokens[i];
            size_t n = 0;
            const char *piece = moex_token_piece(m, t->id, &n);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "token", string_n(piece ? piece : "", n));
            cJSON_AddNumberToObject(e, "logprob", t->logprob);
            cJSON_AddItemToObject(e, "bytes", token_bytes(piece, n));
            cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < t->n_top; k++) {
                const char *tp = moex_token_piece(m, t->top_id[k], &n);
                cJSON *a = cJSON_CreateObject();
                cJSON_AddItemToObject(a, "token", string_n(tp ? tp : "", n));
                cJSON_AddNumberToObject(a, "logprob", t->top_logprob[k]);
                cJSON_AddItemToObject(a, "bytes", token_bytes(tp, n));
                cJSON_AddItemToArray(top, a);
            }
            cJSON_AddItemToArray(content, e);
        }
        cJSON_AddNullToObject(lp, "refusal");
        return lp;
    }
    cJSON *tokens = cJSON_AddArrayToObject(lp, "tokens"), *lps = cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(lp, "top_logprobs"), *offsets = cJSON_AddArrayToObject(lp, "text_offset");
    size_t offset = r->echo ? r->prompt_len : 0;
    for (int i = from; i < to; i++) {
        const struct serve_token *t = &j->tokens[i];
        size_t n = 0;
        const char *piece = moex_token_piece(m, t->id, &n);
        cJSON_AddItemToArray(tokens, string_n(piece ? piece : "", n));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(t->logprob));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < t->n_top; k++) {
            const char *tp = moex_token_piece(m, t->top_id[k], &n);
            cJSON *key = string_n(tp ? tp : "", n);
            if (!cJSON_GetObjectItemCaseSensitive(top, key->valuestring))
                cJSON_AddNumberToObject(top, key->valuestring, t->top_logprob[k]);
            cJSON_Delete(key);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(offset + (i > 0 ? j->tokens[i - 1].text_end : 0))));
    }
    return lp;
}

/* The tokens whose text lies within text[0..len). */
static int tokens_within(const struct serve_job *j, size_t len) {
    int n = 0;
    while (n < j->n_tokens && j->tokens[n].text_end <= len) n++;
    return n;
}

static void add_usage(cJSON *root, struct serve_job *const *jobs, int n) {
    int generated = 0, reused = 0;
    for (int i = 0; i < n; i++) {
        generated += jobs[i]->n_generated;
        reused = jobs[i]->n_reused > reused ? jobs[i]->n_reused : reused;
    }
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", jobs[0]->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", generated);
    cJSON_AddNumberToObject(u, "total_tokens", jobs[0]->n_prompt + generated);
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", reused);
}

char *api_completion_json(const moex_model *m, const struct api_request *r, const char *id, long created,
                          const char *model, struct serve_job *const *jobs) {
    cJSON *root = head(r, id, created, model, false);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    for (int i = 0; i < r->n; i++) {
        const struct serve_job *j = jobs[i];
        const char *text = j->text ? j->text : "";
        cJSON *choice = add_choice(choices, i);
        cJSON *lp = r->logprobs ? logprobs_json(m, r, j, 0, tokens_within(j, j->len)) : NULL;
        if (r->chat) {
            struct think_split sp;
            api_split_think(r, text, j->len, true, &sp);
            cJSON *msg = cJSON_AddObjectToObject(choice, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            add_string_n(msg, "content", text + sp.c0, sp.c1 - sp.c0);
            if (sp.r1 > sp.r0) add_string_n(msg, "reasoning_content", text + sp.r0, sp.r1 - sp.r0);
            cJSON_AddNullToObject(msg, "refusal");
        } else {
            size_t n = (r->echo ? r->prompt_len : 0) + j->len;
            char *all = malloc(n + 1);
            if (all) {
                if (r->echo) memcpy(all, r->prompt_text, r->prompt_len);
                memcpy(all + (r->echo ? r->prompt_len : 0), text, j->len);
                add_string_n(choice, "text", all, n);
            }
            free(all);
        }
        if (lp) cJSON_AddItemToObject(choice, "logprobs", lp);
        else cJSON_AddNullToObject(choice, "logprobs");
        cJSON_AddStringToObject(choice, "finish_reason", j->finish);
        if (r->chat) {
            struct think_split sp;
            api_split_think(r, text, j->len, true, &sp);
            serve_struct_message(j->structured, choice, text + sp.c0, sp.c1 - sp.c0);
        }
    }
    add_usage(root, jobs, r->n);
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

char *api_chunk_event(const moex_model *m, const struct api_request *r, const char *id, long created,
                      const char *model, const struct api_piece *p) {
    cJSON *root = head(r, id, created, model, true);
    cJSON *choice = add_choice(cJSON_AddArrayToObject(root, "choices"), p->index);
    const char *finish = p->finish;
    if (r->chat) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        const char *text = p->content ? p->content : "";
        size_t len = p->content_len;
        if (p->role) cJSON_AddStringToObject(delta, "role", "assistant");
        else serve_struct_delta(r->structured, delta, &text, &len, &finish);
        if (len || p->role) add_string_n(delta, "content", text, len);
        if (p->reasoning_len) add_string_n(delta, "reasoning_content", p->reasoning, p->reasoning_len);
    } else {
        add_string_n(choice, "text", p->content, p->content_len);
    }
    if (r->logprobs && p->job && p->tok_to > p->tok_from)
        cJSON_AddItemToObject(choice, "logprobs", logprobs_json(m, r, p->job, p->tok_from, p->tok_to));
    else cJSON_AddNullToObject(choice, "logprobs");
    if (finish) cJSON_AddStringToObject(choice, "finish_reason", finish);
    else cJSON_AddNullToObject(choice, "finish_reason");
    return event(root);
}

char *api_usage_event(const struct api_request *r, const char *id, long created, const char *model,
                      struct serve_job *const *jobs) {
    cJSON *root = head(r, id, created, model, true);
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, jobs, r->n);
    return event(root);
}

char *api_error_event(const struct api_error *e) {
    char *json = api_error_json(e);
    if (!json) return NULL;
    size_t n = strlen(json) + 9;
    char *ev = malloc(n);
    if (ev) snprintf(ev, n, "data: %s\n\n", json);
    free(json);
    return ev;
}

static cJSON *model_object(const char *model, long created) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "moex");
    return m;
}

char *api_models_json(const char *model, long created) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_object(model, created));
    return print_free(root);
}

char *api_model_json(const char *model, long created) { return print_free(model_object(model, created)); }
