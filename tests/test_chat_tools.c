/* Tools in the chat formats: Qwen3's rendering against its
 * tokenizer.chat_template (the oracle models') rendered by Jinja2 3.1 as
 * HuggingFace does (trim_blocks, lstrip_blocks, tojson as json.dumps), with
 * tools, assistant tool calls (arguments as a string and as an object) and
 * tool results; LFM2's; the grammar of forced calls in both formats. */
#include "harness.h"
#include "core/error.h"
#include "text/chat.h"
#include "text/grammar.h"
#include "text/json_schema_tools.h"

#include <stdlib.h>
#include <string.h>

struct tools_case {
    struct chat_message m[6];
    const char *calls[6];
    int n;
    const char *want;
};

static const char *const TOOLS = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}]";
static const struct tools_case qwen3_cases[] = {
    {{{"system", "Be brief."}, {"user", "Weather in Paris?"}}, {NULL, NULL}, 2,
     "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"},
    {{{"user", "Weather in Paris?"}, {"assistant", ""}, {"tool", "{\"sky\": \"clear\"}"}, {"tool", "12:00"}}, {NULL, "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}, {\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": \"{}\"}}]", NULL, NULL}, 4,
     "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"sky\": \"clear\"}\n</tool_response>\n<tool_response>\n12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
    {{{"system", "S"}, {"user", "q"}, {"assistant", "Let me check."}, {"tool", "noon"}, {"assistant", "It is noon."}, {"user", "thanks"}}, {NULL, NULL, "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}}]", NULL, NULL, NULL}, 6,
     "<|im_start|>system\nS\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nnoon\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is noon.<|im_end|>\n<|im_start|>user\nthanks<|im_end|>\n<|im_start|>assistant\n"},
};

static bool matches(const char *gbnf, const char *s) {
    struct grammar *g = grammar_parse(gbnf, NULL);
    struct grammar_matcher *m = g ? grammar_matcher_new(g) : NULL;
    bool ok = m && grammar_matcher_accept(m, s, strlen(s)) == 0 && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    grammar_free(g);
    return ok;
}

static void test_qwen3(void) {
    for (size_t i = 0; i < sizeof qwen3_cases / sizeof qwen3_cases[0]; i++) {
        const struct tools_case *c = &qwen3_cases[i];
        size_t len = 0;
        char *text = chat_render_json(CHAT_FORMAT_QWEN3, c->m, c->n, c->calls, TOOLS, true, true, &len);
        CHECKF(text && strcmp(text, c->want) == 0 && len == strlen(c->want), "case %zu:\n%s\nwant:\n%s", i,
               text ? text : moex_error(), c->want);
        free(text);
    }
    /* without tools and calls: chat_render's text */
    struct chat_message plain[2] = { { "system", "s" }, { "user", "u" } };
    char *a = chat_render_json(CHAT_FORMAT_QWEN3, plain, 2, NULL, NULL, true, false, NULL);
    char *b = chat_render(CHAT_FORMAT_QWEN3, plain, 2, true, false, NULL);
    CHECK(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
    moex_clear_error();
    CHECK(!chat_render_json(CHAT_FORMAT_QWEN3, plain, 2, NULL, "{\"not\": \"a list\"}", true, false, NULL));
    CHECKF(strstr(moex_error(), "not a JSON array"), "%s", moex_error());
    const char *bad_calls[2] = { NULL, "[{\"function\": {\"arguments\": \"{}\"}}]" };
    CHECK(!chat_render_json(CHAT_FORMAT_QWEN3, plain, 2, bad_calls, TOOLS, true, false, NULL));
    CHECKF(strstr(moex_error(), "no function name"), "%s", moex_error());
}

static void test_lfm2(void) {
    struct chat_message m[4] = { { "system", "S" }, { "user", "q" }, { "assistant", "ok" }, { "tool", "noon" } };
    const char *calls[4] = { NULL, NULL, "[{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"UTC\\\"}\"}}]", NULL };
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}]";
    char *text = chat_render_json(CHAT_FORMAT_LFM2, m, 4, calls, tools, true, true, NULL);
    const char *want = "<|startoftext|><|im_start|>system\nS\nList of tools: <|tool_list_start|>[{\"type\": \"function\", "
                       "\"function\": {\"name\": \"get_time\"}}]<|tool_list_end|><|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
                       "<|im_start|>assistant\n<|tool_call_start|>[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]"
                       "<|tool_call_end|>ok<|im_end|>\n<|im_start|>tool\n<|tool_response_start|>noon<|tool_response_end|>"
                       "<|im_end|>\n<|im_start|>assistant\n";
    CHECKF(text && strcmp(text, want) == 0, "%s", text ? text : moex_error());
    free(text);
    const char *open, *close;
    CHECK(chat_tool_markers(CHAT_FORMAT_LFM2, &open, &close) && strcmp(open, "<|tool_call_start|>") == 0);
    CHECK(chat_tool_markers(CHAT_FORMAT_QWEN35, &open, &close) && strcmp(close, "</tool_call>") == 0);
    CHECK(!chat_tool_markers(CHAT_FORMAT_CHATML, &open, &close));
}

static void test_grammar(void) {
    char *g = chat_tool_grammar(CHAT_FORMAT_QWEN3, TOOLS, NULL, false);
    CHECKF(g != NULL, "%s", moex_error());
    if (g) {
        CHECK(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
        CHECK(matches(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
        CHECK(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));   /* city is required */
        CHECK(!matches(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
        CHECK(!matches(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                          "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));   /* one call only */
    }
    free(g);
    g = chat_tool_grammar(CHAT_FORMAT_QWEN3, TOOLS, "get_time", true);
    if (g) {
        CHECK(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
        CHECK(matches(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                         "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    }
    free(g);
    g = chat_tool_grammar(CHAT_FORMAT_LFM2, TOOLS, NULL, true);
    if (g) {
        CHECK(matches(g, "<|tool_call_start|>[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                         "\"arguments\": {\"city\": \"Lima\"}}]<|tool_call_end|>"));
        CHECK(!matches(g, "<|tool_call_start|>[]<|tool_call_end|>"));
    }
    free(g);
    moex_clear_error();
    CHECK(!chat_tool_grammar(CHAT_FORMAT_QWEN3, TOOLS, "nope", false));
    CHECKF(strstr(moex_error(), "no function is named 'nope'"), "%s", moex_error());
    CHECK(!chat_tool_grammar(CHAT_FORMAT_CHATML, TOOLS, NULL, false));
    CHECKF(strstr(moex_error(), "has no tool calls"), "%s", moex_error());
    const char *patterned = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                            "\"properties\": {\"a\": {\"type\": \"string\", \"format\": \"email\"}}}}}]";
    CHECK(!chat_tool_grammar(CHAT_FORMAT_QWEN3, patterned, NULL, false));
    CHECKF(strstr(moex_error(), "function 'f'") && strstr(moex_error(), "'format' \"email\""), "%s", moex_error());
}

int main(void) {
    test_qwen3();
    test_lfm2();
    test_grammar();
    return test_finish();
}
