#include "serve/serve_struct.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct serve_struct {
    char *grammar;             /* GBNF for the sampler, or NULL */
    bool tools;                /* replies are searched for tool calls */
    const char *open, *close;  /* the template's call markers (static strings) */
    bool lfm2_list;            /* the markers hold a JSON array of calls (LFM2) */
    /* a stream's text so far (the connection's thread only) */
    char *seen;
    size_t seen_len, seen_cap, sent;
    bool in_call;              /* the open marker has come: no more content */
    size_t scan;               /* where the next call block is looked for */
    int calls_sent;
};

void serve_struct_free(struct serve_struct *st) {
    if (!st) return;
    free(st->grammar);
    free(st->seen);
    free(st);
}

/* The GBNF is checked now, so that a bad one is the request's 400. */
static int check_grammar(const moex_model *m, const char *gbnf, const char *param, struct api_error *e) {
    moex_sampler *s = moex_sampler_new(m, NULL);
    if (!s) return api_refuse(e, param, NULL, "out of memory");
    int rc = moex_sampler_set_grammar(s, gbnf, NULL);
    if (rc) api_refuse(e, param, NULL, "%s", moex_last_error());
    moex_sampler_free(s);
    return rc;
}

static char *response_format_grammar(const cJSON *rf, struct api_error *e) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return api_refuse(e, "response_format", NULL, "'response_format' must be an object with a 'type'"), NULL;
    if (strcmp(type->valuestring, "text") == 0) return NULL;
    if (strcmp(type->valuestring, "json_object") == 0) {
        char *g = moex_json_schema_to_grammar(NULL);
        if (!g) api_refuse(e, "response_format", NULL, "%s", moex_last_error());
        return g;
    }
    if (strcmp(type->valuestring, "json_schema") != 0)
        return api_refuse(e, "response_format", NULL, "'response_format.type' must be text, json_object or json_schema"), NULL;
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!cJSON_IsObject(js) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(js, "name")))
        return api_refuse(e, "response_format", NULL, "'response_format.json_schema' must be an object with a 'name'"), NULL;
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return api_refuse(e, "response_format", NULL, "'response_format.json_schema.strict' must be a boolean"), NULL;
    char *text = schema ? cJSON_PrintUnformatted(schema) : NULL;
    if (schema && !text) return api_refuse(e, "response_format", NULL, "out of memory"), NULL;
    char *g = moex_json_schema_to_grammar(text);   /* no schema: any JSON object */
    if (!g) api_refuse(e, "response_format", NULL, "%s", moex_last_error());
    free(text);
    return g;
}

/* Checks the tools' shape; the named function of tool_choice, if any. */
static int check_tools(const cJSON *tools, struct api_error *e) {
    if (!cJSON_IsArray(tools)) return api_refuse(e, "tools", NULL, "'tools' must be an array");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsObject(f))
            return api_refuse(e, "tools", NULL, "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || !name->valuestring[0])
            return api_refuse(e, "tools", NULL, "tools[%d].function needs a 'name'", i);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        if (params && !cJSON_IsObject(params))
            return api_refuse(e, "tools", NULL, "tools[%d].function.parameters must be an object", i);
        i++;
    }
    return 0;
}

static bool has_function(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return true;
    }
    return false;
}

int serve_struct_parse(const moex_model *m, const cJSON *root, bool chat, struct serve_job *j, struct api_error *e) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    const cJSON *parallel = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (cJSON_IsNull(rf)) rf = NULL;
    if (cJSON_IsNull(gbnf)) gbnf = NULL;
    if (cJSON_IsNull(tools) || (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) == 0)) tools = NULL;
    if (cJSON_IsNull(choice)) choice = NULL;
    if (cJSON_IsNull(parallel)) parallel = NULL;
    if (!rf && !gbnf && !tools && !choice && !parallel) return 0;
    if (parallel && !cJSON_IsBool(parallel)) return api_refuse(e, "parallel_tool_calls", NULL, "'parallel_tool_calls' must be a boolean");
    if (gbnf && !cJSON_IsString(gbnf)) return api_refuse(e, "grammar", NULL, "'grammar' must be a string (GBNF)");
    if (!chat && (tools || choice)) return api_refuse(e, tools ? "tools" : "tool_choice", NULL, "tools need /v1/chat/completions");
    if (tools && check_tools(tools, e)) return -1;
    /* tool_choice: none, auto, required or {"type": "function", "function": {"name": ...}} */
    const char *forced = NULL;
    bool use_tools = tools != NULL, required = false;
    if (choice) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"), "name");
        if (cJSON_IsString(choice) && strcmp(choice->valuestring, "none") == 0) use_tools = false;
        else if (cJSON_IsString(choice) && strcmp(choice->valuestring, "required") == 0) required = true;
        else if (cJSON_IsString(choice) && strcmp(choice->valuestring, "auto") == 0) {}
        else if (cJSON_IsObject(choice) && cJSON_IsString(fn)) { required = true; forced = fn->valuestring; }
        else return api_refuse(e, "tool_choice", NULL, "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        if (required && !tools) return api_refuse(e, "tool_choice", NULL, "'tool_choice' asks for a tool call but there are no 'tools'");
        if (forced && !has_function(tools, forced)) return api_refuse(e, "tool_choice", NULL, "no tool is named '%s'", forced);
    }
    if (required && (gbnf || rf))
        return api_refuse(e, gbnf ? "grammar" : "response_format", NULL, "a forced tool call and '%s' cannot be combined",
                      gbnf ? "grammar" : "response_format");
    struct serve_struct *st = calloc(1, sizeof *st);
    if (!st) return api_refuse(e, NULL, NULL, "out of memory");
    j->structured = st;
    if (use_tools) {
        if (!moex_chat_tool_markers(m, &st->open, &st->close)) {
            if (required) return api_refuse(e, "tool_choice", NULL, "the model's chat template has no tool calls");
        } else {
            st->tools = true;
            st->lfm2_list = st->open[0] == '<' && st->open[1] == '|';
        }
    }
    if (gbnf) {
        if (rf) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
                return api_refuse(e, "grammar", NULL, "'grammar' and 'response_format' cannot be combined");
        }
        if (check_grammar(m, gbnf->valuestring, "grammar", e)) return -1;
        if (!(st->grammar = strdup(gbnf->valuestring))) return api_refuse(e, NULL, NULL, "out of memory");
    } else if (rf) {
        e->message[0] = 0;
        st->grammar = response_format_grammar(rf, e);
        if (!st->grammar && e->message[0]) return -1;
    } else if (required) {
        char *tools_json = cJSON_PrintUnformatted(tools);
        if (!tools_json) return api_refuse(e, NULL, NULL, "out of memory");
        bool many = !parallel || cJSON_IsTrue(parallel);
        st->grammar = moex_chat_tool_grammar(m, tools_json, forced, many);
        free(tools_json);
        if (!st->grammar) return api_refuse(e, "tools", NULL, "%s", moex_last_error());
    }
    /* what a schema or the tools made is checked too: the job must not fail later */
    if (st->grammar && !gbnf && check_grammar(m, st->grammar, rf ? "response_format" : "tools", e)) return -1;
    return 0;
}

/* Whether the request forces the reply's form (a grammar, a JSON response
 * format, a forced tool call). */
static bool forced_form(const cJSON *root) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "grammar")) ||
           (cJSON_IsString(type) && strcmp(type->valuestring, "text") != 0) || cJSON_IsObject(choice) ||
           (cJSON_IsString(choice) && strcmp(choice->valuestring, "required") == 0);
}

char *serve_struct_chat_apply(const moex_model *m, const cJSON *root, const struct moex_chat_message *msgs, int n,
                              bool enable_thinking, size_t *len) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    /* the grammar leaves no room for a think block: the prompt gets the
     * template's empty one (Qwen3.5's would open one for the reply to fill) */
    if (forced_form(root)) enable_thinking = false;
    bool listed = cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0 &&
                  !(cJSON_IsString(choice) && strcmp(choice->valuestring, "none") == 0);
    bool calls = false;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, messages) calls |= cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"));
    if (!listed && !calls) return moex_chat_apply(m, msgs, n, true, enable_thinking, len);
    char **calls_json = calloc((size_t)n + 1, sizeof *calls_json);
    char *tools_json = listed ? cJSON_PrintUnformatted(tools) : NULL;
    char *text = NULL;
    if (calls_json && (!listed || tools_json)) {
        int i = 0;
        bool ok = true;
        cJSON_ArrayForEach(msg, messages) {
            const cJSON *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
            if (i < n && cJSON_IsArray(tc) && !(calls_json[i] = cJSON_PrintUnformatted(tc))) ok = false;
            i++;
        }
        if (ok) text = moex_chat_apply_tools(m, msgs, (const char *const *)calls_json, n, tools_json, true,
                                             enable_thinking, len);
    }
    for (int i = 0; calls_json && i < n; i++) free(calls_json[i]);
    free(calls_json);
    free(tools_json);
    return text;
}

int serve_struct_sampler(const struct serve_struct *st, moex_sampler *s) {
    if (!st || !st->grammar) return 0;
    return moex_sampler_set_grammar(s, st->grammar, NULL);
}

/* Unique enough across restarts: the time and a counter, mixed. */
static void call_id(char *out, size_t size) {
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (++counter * 0x9E3779B97F4A7C15ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    snprintf(out, size, "call_%016llx", (unsigned long long)x);
}

/* {"name", "arguments"} -> an OpenAI tool call (arguments as a JSON string); false when it is not that shape. */
static bool add_call(cJSON *list, const cJSON *call, int index, bool stream) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(call, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "arguments");
    if (!cJSON_IsString(name)) return false;
    char *args_text = args ? (cJSON_IsString(args) ? strdup(args->valuestring) : cJSON_PrintUnformatted(args)) : strdup("{}");
    if (!args_text) return false;
    char id[40];
    call_id(id, sizeof id);
    cJSON *c = cJSON_CreateObject();
    if (stream) cJSON_AddNumberToObject(c, "index", index);
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(f, "name", name->valuestring);
    cJSON_AddStringToObject(f, "arguments", args_text);
    free(args_text);
    cJSON_AddItemToArray(list, c);
    return true;
}

/* Where needle first occurs in text[from..len), or len. */
static size_t find(const char *text, size_t len, size_t from, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = from; i + n <= len; i++)
        if (memcmp(text + i, needle, n) == 0) return i;
    return len;
}

/* The calls of the next whole open...close block of text[*at..len) into
 * list (numbered from *n); *at moves past it. 0: none left; -1: a block
 * that is not a call. */
static int next_calls(const struct serve_struct *st, const char *text, size_t len, size_t *at, cJSON *list, int *n,
                      bool stream) {
    size_t o = find(text, len, *at, st->open);
    if (o == len) return 0;
    size_t body = o + strlen(st->open), c = find(text, len, body, st->close);
    if (c == len) return 0;
    *at = c + strlen(st->close);
    cJSON *v = cJSON_ParseWithLength(text + body, c - body);
    bool ok = true;
    if (cJSON_IsArray(v) && st->lfm2_list) {
        const cJSON *item;
        cJSON_ArrayForEach(item, v) ok = ok && add_call(list, item, (*n)++, stream);
    } else {
        ok = cJSON_IsObject(v) && add_call(list, v, (*n)++, stream);
    }
    cJSON_Delete(v);
    return ok ? 1 : -1;
}

/* Every call of text[0..len) into a new array; NULL when there is none or a
 * block is not a call. *content_end: where the text before the first ends. */
static cJSON *find_calls(const struct serve_struct *st, const char *text, size_t len, size_t *content_end) {
    cJSON *list = cJSON_CreateArray();
    size_t at = 0;
    int n = 0, rc;
    *content_end = find(text, len, 0, st->open);
    while (list && (rc = next_calls(st, text, len, &at, list, &n, false)) > 0) {}
    if (!list || rc < 0 || n == 0) {
        cJSON_Delete(list);
        *content_end = len;
        return NULL;
    }
    return list;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

void serve_struct_message(struct serve_struct *st, cJSON *choice, const char *text, size_t len) {
    if (!st || !st->tools || !text) return;
    cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    if (!msg || !cJSON_IsString(finish) || strcmp(finish->valuestring, "stop") != 0) return;
    size_t content_end;
    cJSON *calls = find_calls(st, text, len, &content_end);
    if (!calls) return;
    if (blank(text, content_end)) {
        cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", cJSON_CreateNull());
    } else {
        char *c = malloc(content_end + 1);
        if (c) {
            memcpy(c, text, content_end);
            c[content_end] = 0;
            cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", cJSON_CreateString(c));
        }
        free(c);
    }
    cJSON_AddItemToObject(msg, "tool_calls", calls);
    cJSON_ReplaceItemInObjectCaseSensitive(choice, "finish_reason", cJSON_CreateString("tool_calls"));
}

static bool remember(struct serve_struct *st, const char *text, size_t len) {
    if (st->seen_len + len + 1 > st->seen_cap) {
        size_t cap = st->seen_cap ? st->seen_cap : 256;
        while (cap < st->seen_len + len + 1) cap *= 2;
        char *s = realloc(st->seen, cap);
        if (!s) return false;
        st->seen = s;
        st->seen_cap = cap;
    }
    if (len) memcpy(st->seen + st->seen_len, text, len);
    st->seen_len += len;
    st->seen[st->seen_len] = 0;
    return true;
}

void serve_struct_delta(struct serve_struct *st, cJSON *delta, const char **text, size_t *len, const char **finish) {
    if (!st || !st->tools) return;
    if (!remember(st, *text, *len)) return;   /* out of memory: the text goes out as it is */
    size_t open_len = strlen(st->open), until = st->sent;
    if (!st->in_call) {
        /* send what cannot be the start of a call; hold back a tail that may begin the marker */
        size_t o = find(st->seen, st->seen_len, st->sent, st->open);
        if (o < st->seen_len) {
            st->in_call = true;
            st->scan = until = o;
        } else {
            size_t keep = open_len - 1 < st->seen_len - st->sent ? open_len - 1 : st->seen_len - st->sent;
            while (keep > 0 && memcmp(st->seen + st->seen_len - keep, st->open, keep) != 0) keep--;
            until = st->seen_len - keep;
        }
    }
    if (st->in_call) {
        /* each call goes out as soon as its block is whole (the finish comes in a later chunk, as
         * the client libraries expect) */
        cJSON *list = cJSON_CreateArray();
        while (list && next_calls(st, st->seen, st->seen_len, &st->scan, list, &st->calls_sent, true) != 0) {}
        if (list && cJSON_GetArraySize(list) > 0) cJSON_AddItemToObject(delta, "tool_calls", list);
        else cJSON_Delete(list);
    }
    if (*finish) {
        if (st->calls_sent == 0) until = st->seen_len;   /* no call after all: the held text is content */
        else if (strcmp(*finish, "stop") == 0) *finish = "tool_calls";
    }
    *text = st->seen + st->sent;
    *len = until - st->sent;
    st->sent = until;
}
