/* Tools given as OpenAI's JSON: rendered into the chat (chat_render_tools)
 * and turned into the grammar that forces calls in the format's markers. */
#include "text/json_schema_tools.h"

#include "core/error.h"
#include "text/json_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARALLEL_CALLS 5   /* a forced reply holds at most this many calls */

/* The function object of a tool: {"type": "function", "function": {...}}
 * or the function itself. */
static const struct json *function_of(const struct json *tool) {
    const struct json *f = json_get(tool, "function");
    return f && f->type == JSON_OBJECT ? f : tool;
}

static const char *function_name(const struct json *tool) {
    const struct json *name = json_get(function_of(tool), "name");
    return name && name->type == JSON_STRING ? name->str : NULL;
}

static struct json *parse_tools(const char *tools_json) {
    struct json *tools = json_parse(tools_json, strlen(tools_json));
    if (!tools) return NULL;
    if (tools->type != JSON_ARRAY) {
        json_free(tools);
        return moex_errorf("tools: not a JSON array"), NULL;
    }
    for (int i = 0; i < tools->n; i++) {
        if (!function_name(&tools->items[i])) {
            json_free(tools);
            return moex_errorf("tools: tool %d has no function name", i), NULL;
        }
    }
    return tools;
}

char *chat_render_json(enum chat_format fmt, const struct chat_message *msgs, int n, const char *const *calls_json,
                       const char *tools_json, bool add_generation_prompt, bool enable_thinking, size_t *len) {
    struct json *tools = NULL, **calls = NULL;
    struct json_buf *tool_text = NULL, *args = NULL;
    const char **tool_strs = NULL;
    struct chat_calls *cc = NULL;
    struct chat_tool_call *list = NULL;
    char *text = NULL;
    int n_tools = 0, n_args = 0;
    if (tools_json && !(tools = parse_tools(tools_json))) return NULL;
    n_tools = tools ? tools->n : 0;
    tool_text = calloc((size_t)n_tools + 1, sizeof *tool_text);
    tool_strs = calloc((size_t)n_tools + 1, sizeof *tool_strs);
    calls = calloc((size_t)n + 1, sizeof *calls);
    cc = calloc((size_t)n + 1, sizeof *cc);
    if (!tool_text || !tool_strs || !calls || !cc) goto oom;
    for (int i = 0; i < n_tools; i++) {
        json_write(&tool_text[i], &tools->items[i], true);   /* the templates' tojson */
        if (tool_text[i].oom) goto oom;
        tool_strs[i] = tool_text[i].s;
    }
    int total = 0;
    for (int i = 0; calls_json && i < n; i++) {
        if (!calls_json[i]) continue;
        if (!(calls[i] = json_parse(calls_json[i], strlen(calls_json[i])))) goto done;
        if (calls[i]->type != JSON_ARRAY) {
            moex_errorf("chat: message %d: tool_calls is not an array", i);
            goto done;
        }
        total += calls[i]->n;
    }
    list = calloc((size_t)total + 1, sizeof *list);
    args = calloc((size_t)total + 1, sizeof *args);
    if (!list || !args) goto oom;
    for (int i = 0; i < n; i++) {
        if (!calls[i]) continue;
        cc[i].calls = &list[n_args];
        for (int k = 0; k < calls[i]->n; k++) {
            const struct json *f = function_of(&calls[i]->items[k]), *a = json_get(f, "arguments");
            if (!function_name(&calls[i]->items[k])) {
                moex_errorf("chat: message %d: tool call %d has no function name", i, k);
                goto done;
            }
            /* a string is written as it is, anything else as tojson prints it */
            if (!a) json_buf_puts(&args[n_args], "{}");
            else if (a->type == JSON_STRING) json_buf_put(&args[n_args], a->str, a->len);
            else json_write(&args[n_args], a, true);
            if (args[n_args].oom) goto oom;
            list[n_args].name = function_name(&calls[i]->items[k]);
            list[n_args].arguments = args[n_args].s ? args[n_args].s : "";
            n_args++;
            cc[i].n++;
        }
    }
    text = chat_render_tools(fmt, msgs, calls_json ? cc : NULL, n, tool_strs, n_tools, add_generation_prompt,
                             enable_thinking, len);
    goto done;
oom:
    moex_errorf("chat: out of memory");
done:
    for (int i = 0; tool_text && i < n_tools; i++) free(tool_text[i].s);
    for (int i = 0; args && i < n_args; i++) free(args[i].s);
    for (int i = 0; calls && i < n; i++) json_free(calls[i]);
    free(tool_text);
    free(tool_strs);
    free(calls);
    free(cc);
    free(list);
    free(args);
    json_free(tools);
    return text;
}

char *chat_tool_grammar(enum chat_format fmt, const char *tools_json, const char *name, bool parallel) {
    const char *open, *close;
    if (!chat_tool_markers(fmt, &open, &close))
        return moex_errorf("tools: the model's chat format (%s) has no tool calls", chat_format_name(fmt)), NULL;
    if (!tools_json) return moex_errorf("tools: no tools"), NULL;
    struct json *tools = parse_tools(tools_json);
    if (!tools) return NULL;
    bool lfm2 = fmt == CHAT_FORMAT_LFM2;
    struct json_buf out = { 0 }, call = { 0 };
    int rc = 0, used = 0;
    /* call ::= the literal up to the arguments, the arguments, the closing brace; one alternative per tool */
    json_buf_puts(&call, "tool-call ::= ");
    for (int i = 0; i < tools->n && rc == 0; i++) {
        const char *fname = function_name(&tools->items[i]);
        if (name && strcmp(name, fname) != 0) continue;
        char rule[32];
        snprintf(rule, sizeof rule, "tool-%d", i);
        const struct json *params = json_get(function_of(&tools->items[i]), "parameters");
        if (params) {
            rc = json_schema_rules(params, params, rule, &out);
            if (rc) {
                char why[256];   /* moex_error() is the buffer moex_errorf writes */
                snprintf(why, sizeof why, "%s", moex_error());
                moex_errorf("tools: function '%s': %s", fname, why);
            }
        } else {
            json_buf_puts(&out, rule);
            json_buf_puts(&out, " ::= json-object\n");
        }
        struct json_buf head = { 0 };
        json_buf_puts(&head, lfm2 ? "{\"name\": " : "\n{\"name\": ");
        json_write_string(&head, fname, strlen(fname));
        json_buf_puts(&head, ", \"arguments\": ");
        if (used++) json_buf_puts(&call, " | ");
        json_schema_literal(&call, head.s ? head.s : "", head.n);
        json_buf_puts(&call, " ");
        json_buf_puts(&call, rule);
        json_buf_puts(&call, lfm2 ? " \"}\"" : " \"}\\n\"");
        if (head.oom) out.oom = true;
        free(head.s);
    }
    if (rc == 0 && used == 0) rc = moex_errorf("tools: no function is named '%s'", name ? name : "");
    if (rc == 0) {
        char more[64];
        json_buf_put(&out, call.s, call.n);
        json_buf_puts(&out, "\nroot ::= ");
        json_schema_literal(&out, open, strlen(open));
        if (lfm2) {
            /* one list of calls: [call, call] */
            snprintf(more, sizeof more, " (\", \" tool-call){0,%d}", parallel ? MAX_PARALLEL_CALLS - 1 : 0);
            json_buf_puts(&out, " \"[\" tool-call");
            json_buf_puts(&out, more);
            json_buf_puts(&out, " \"]\" ");
            json_schema_literal(&out, close, strlen(close));
        } else {
            /* <tool_call>\n{...}\n</tool_call>, "\n" between calls */
            json_buf_puts(&out, " tool-call ");
            json_schema_literal(&out, close, strlen(close));
            if (parallel) {
                snprintf(more, sizeof more, "){0,%d}", MAX_PARALLEL_CALLS - 1);
                json_buf_puts(&out, " (\"\\n\" ");
                json_schema_literal(&out, open, strlen(open));
                json_buf_puts(&out, " tool-call ");
                json_schema_literal(&out, close, strlen(close));
                json_buf_puts(&out, more);
            }
        }
        json_buf_puts(&out, "\n");
        json_schema_common_rules(&out);
        if (out.oom) rc = moex_errorf("tools: out of memory");
    }
    free(call.s);
    json_free(tools);
    if (rc) {
        free(out.s);
        return NULL;
    }
    return out.s;
}
