/* ChatML and Qwen3 chat rendering. The Qwen3 rules below follow the template
 * stored in Qwen3's GGUF (tokenizer.chat_template); the test compares with
 * that template rendered by Jinja2. */
#include "text/chat.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define IM_START "<|im_start|>"
#define IM_END "<|im_end|>"
#define EMPTY_THINK "<think>\n\n</think>\n\n"
#define GENERATION_PROMPT IM_START "assistant\n"
#define OPEN_THINK "<think>\n"
/* Qwen3.5's generation prompt opens the think block by default: the line
 * that does it, as it stands in the Jinja source. */
#define QWEN35_MARK "{{- '<think>\\n' }}"
#define LFM2_BOS "<|startoftext|>"

enum chat_format chat_format_detect(const char *tmpl) {
    if (!tmpl || !strstr(tmpl, IM_START)) return CHAT_FORMAT_UNKNOWN;
    /* LFM2's templates name their tool-list markers (LFM2.5: plain text). */
    if (strstr(tmpl, "<|tool_list_start|>") || strstr(tmpl, "List of tools: [") || strstr(tmpl, LFM2_BOS))
        return CHAT_FORMAT_LFM2;
    if (!strstr(tmpl, "</think>")) return CHAT_FORMAT_CHATML;
    return strstr(tmpl, QWEN35_MARK) ? CHAT_FORMAT_QWEN35 : CHAT_FORMAT_QWEN3;
}

const char *chat_format_name(enum chat_format fmt) {
    switch (fmt) {
    case CHAT_FORMAT_CHATML: return "chatml";
    case CHAT_FORMAT_QWEN3: return "qwen3";
    case CHAT_FORMAT_QWEN35: return "qwen3.5";
    case CHAT_FORMAT_LFM2: return "lfm2";
    default: return "unknown";
    }
}

static bool renderable(enum chat_format fmt) {
    return fmt == CHAT_FORMAT_CHATML || fmt == CHAT_FORMAT_QWEN3 || fmt == CHAT_FORMAT_QWEN35 ||
           fmt == CHAT_FORMAT_LFM2;
}

void chat_text_free(struct chat_text *t) {
    free(t->data);
    memset(t, 0, sizeof *t);
}

static int put_n(struct chat_text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1) cap *= 2;
        char *d = realloc(t->data, cap);
        if (!d) return moex_errorf("chat: out of memory");
        t->data = d;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = 0;
    return 0;
}

static int put(struct chat_text *t, const char *s) { return put_n(t, s, strlen(s)); }

/* <|im_start|>role\ncontent<|im_end|>\n */
static int put_turn(struct chat_text *t, const char *role, const char *content) {
    if (put(t, IM_START) || put(t, role) || put(t, "\n") || put(t, content) || put(t, IM_END "\n")) return -1;
    return 0;
}

/* A view into a message. */
struct span {
    const char *s;
    size_t n;
};

static const char *find_last(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (memcmp(s + i, needle, k) == 0) return s + i;
    return NULL;
}

static const char *find_first(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0) return s + i;
    return NULL;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Jinja's |trim. */
static struct span trim_span(struct span x) {
    while (x.n > 0 && is_space(x.s[0])) { x.s++; x.n--; }
    while (x.n > 0 && is_space(x.s[x.n - 1])) x.n--;
    return x;
}

static struct span trim(const char *s) { return trim_span((struct span){ s, strlen(s) }); }

static struct span lstrip_nl(struct span x) {
    while (x.n > 0 && x.s[0] == '\n') { x.s++; x.n--; }
    return x;
}

static struct span rstrip_nl(struct span x) {
    while (x.n > 0 && x.s[x.n - 1] == '\n') x.n--;
    return x;
}

/* Qwen3 splits an assistant message at "</think>": the answer is what follows
 * the last one, the reasoning what precedes the first, after its last
 * "<think>". Without "</think>" the whole message is the answer. */
static void split_span(const char *content, size_t n, struct span *answer, struct span *reasoning) {
    const char *first_end = find_first(content, n, "</think>");
    *answer = (struct span){content, n};
    *reasoning = (struct span){content, 0};
    if (!first_end) return;
    const char *last_end = find_last(content, n, "</think>");
    const char *after = last_end + strlen("</think>");
    *answer = lstrip_nl((struct span){after, (size_t)(content + n - after)});
    struct span before = rstrip_nl((struct span){content, (size_t)(first_end - content)});
    const char *open = find_last(before.s, before.n, "<think>");
    if (open) {
        const char *r = open + strlen("<think>");
        before = (struct span){r, (size_t)(before.s + before.n - r)};
    }
    *reasoning = lstrip_nl(before);
}

static void split_reply(const char *content, struct span *answer, struct span *reasoning) {
    split_span(content, strlen(content), answer, reasoning);
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static bool ends_with(const char *s, size_t n, const char *p) {
    size_t k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* A user message that is a whole tool response does not count as a query. */
static bool is_query(const struct chat_message *m) {
    if (strcmp(m->role, "user") != 0) return false;
    size_t n = strlen(m->content);
    return !(starts_with(m->content, "<tool_response>") && ends_with(m->content, n, "</tool_response>"));
}

#define QWEN_CALL_OPEN "<tool_call>"
#define QWEN_CALL_CLOSE "</tool_call>"
#define LFM2_CALL_OPEN "<|tool_call_start|>"
#define LFM2_CALL_CLOSE "<|tool_call_end|>"

/* Qwen's calls after a reply's content: "\n" before each but a first one
 * that follows no content. */
static int put_qwen_calls(struct chat_text *t, const struct chat_calls *c, bool after_content) {
    for (int k = 0; c && k < c->n; k++) {
        if ((k == 0 && after_content) || k > 0)
            if (put(t, "\n")) return -1;
        if (put(t, QWEN_CALL_OPEN "\n{\"name\": \"") || put(t, c->calls[k].name) || put(t, "\", \"arguments\": ") ||
            put(t, c->calls[k].arguments) || put(t, "}\n" QWEN_CALL_CLOSE))
            return -1;
    }
    return 0;
}

/* Qwen3's system turn when there are tools: the system message (if first) and the list. */
static int put_qwen_tools(struct chat_text *t, const char *system, const char *const *tools, int n_tools) {
    if (put(t, IM_START "system\n")) return -1;
    if (system && (put(t, system) || put(t, "\n\n"))) return -1;
    if (put(t, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"))
        return -1;
    for (int i = 0; i < n_tools; i++)
        if (put(t, "\n") || put(t, tools[i])) return -1;
    return put(t, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                  "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                  "\"arguments\": <args-json-object>}\n</tool_call>" IM_END "\n");
}

static int render_qwen3_assistant(struct chat_text *t, const char *content, bool keep_thinking,
                                  const struct chat_calls *calls) {
    struct span answer, reasoning;
    split_reply(content, &answer, &reasoning);
    bool has_content = answer.n > 0;
    if (keep_thinking) {
        reasoning = lstrip_nl(rstrip_nl(reasoning));
        if (put(t, GENERATION_PROMPT "<think>\n") || put_n(t, reasoning.s, reasoning.n) ||
            put(t, "\n</think>\n\n"))
            return -1;
        answer = lstrip_nl(answer);
    } else if (put(t, GENERATION_PROMPT)) {
        return -1;
    }
    if (put_n(t, answer.s, answer.n) || put_qwen_calls(t, calls, has_content) || put(t, IM_END "\n")) return -1;
    return 0;
}

static int render_qwen3(struct chat_text *t, const struct chat_message *m, const struct chat_calls *calls, int n,
                        const char *const *tools, int n_tools) {
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--)
        if (is_query(&m[i])) { last_query = i; break; }
    int start = 0;   /* with tools, a first system message is in the tools' turn */
    if (n_tools > 0) {
        bool system = strcmp(m[0].role, "system") == 0;
        if (put_qwen_tools(t, system ? m[0].content : NULL, tools, n_tools)) return -1;
        start = system;
    }
    for (int i = start; i < n; i++) {
        const char *role = m[i].role;
        int rc;
        if (strcmp(role, "user") == 0 || strcmp(role, "system") == 0) {
            rc = put_turn(t, role, m[i].content);
        } else if (strcmp(role, "assistant") == 0) {
            /* Replies after the last query (tool-use chains) keep their
             * thinking when it is the last message or has any. */
            bool keep = false;
            if (i > last_query) {
                struct span answer, reasoning;
                split_reply(m[i].content, &answer, &reasoning);
                keep = i == n - 1 || reasoning.n > 0;
            }
            rc = render_qwen3_assistant(t, m[i].content, keep, calls ? &calls[i] : NULL);
        } else if (strcmp(role, "tool") == 0) {
            bool first = i == 0 || strcmp(m[i - 1].role, "tool") != 0;
            bool last = i == n - 1 || strcmp(m[i + 1].role, "tool") != 0;
            rc = (first && put(t, IM_START "user")) || put(t, "\n<tool_response>\n") ||
                 put(t, m[i].content) || put(t, "\n</tool_response>") || (last && put(t, IM_END "\n"));
        } else {
            return moex_errorf("chat: message %d has role \"%s\" (system, user, assistant, tool)", i, role);
        }
        if (rc) return -1;
    }
    return 0;
}

/* <|im_start|>role\n{content|trim}<|im_end|>\n */
static int put_trimmed_turn(struct chat_text *t, const char *role, const char *content) {
    struct span c = trim(content);
    if (put(t, IM_START) || put(t, role) || put(t, "\n") || put_n(t, c.s, c.n) || put(t, IM_END "\n")) return -1;
    return 0;
}

/* Qwen3.5: like Qwen3, but every content is trimmed, replies after the last
 * query always show their (trimmed) reasoning, and the generation prompt
 * opens a think block unless thinking is off. */
static int render_qwen35_assistant(struct chat_text *t, const char *content, bool with_thinking,
                                   const struct chat_calls *calls) {
    struct span c = trim(content), answer, reasoning;
    split_span(c.s, c.n, &answer, &reasoning);
    reasoning = trim_span(reasoning);
    if (put(t, GENERATION_PROMPT)) return -1;
    if (with_thinking && (put(t, OPEN_THINK) || put_n(t, reasoning.s, reasoning.n) || put(t, "\n</think>\n\n")))
        return -1;
    if (put_n(t, answer.s, answer.n) || put_qwen_calls(t, calls, answer.n > 0) || put(t, IM_END "\n")) return -1;
    return 0;
}

static bool is_query_trimmed(const struct chat_message *m) {
    if (strcmp(m->role, "user") != 0) return false;
    struct span c = trim(m->content);
    return !(c.n >= strlen("<tool_response>") && starts_with(c.s, "<tool_response>") &&
             ends_with(c.s, c.n, "</tool_response>"));
}

static int render_qwen35(struct chat_text *t, const struct chat_message *m, const struct chat_calls *calls, int n,
                         const char *const *tools, int n_tools) {
    int last_query = -1;
    for (int i = n - 1; i >= 0 && last_query < 0; i--)
        if (is_query_trimmed(&m[i])) last_query = i;
    if (last_query < 0) return moex_errorf("chat: no user query found in the messages");
    int first = 0;
    if (n_tools > 0) {
        bool system = strcmp(m[0].role, "system") == 0;
        struct span sys = system ? trim(m[0].content) : (struct span){ "", 0 };
        struct chat_text s = { 0 };
        int rc = system ? put_n(&s, sys.s, sys.n) : 0;
        if (rc == 0) rc = put_qwen_tools(t, system ? (s.data ? s.data : "") : NULL, tools, n_tools);
        chat_text_free(&s);
        if (rc) return -1;
        first = system;
    }
    for (int i = first; i < n; i++) {
        const char *role = m[i].role;
        int rc;
        if (strcmp(role, "system") == 0) {
            if (i != 0) return moex_errorf("chat: a system message must be the first (message %d)", i);
            rc = put_trimmed_turn(t, role, m[i].content);
        } else if (strcmp(role, "user") == 0) {
            rc = put_trimmed_turn(t, role, m[i].content);
        } else if (strcmp(role, "assistant") == 0) {
            rc = render_qwen35_assistant(t, m[i].content, i > last_query, calls ? &calls[i] : NULL);
        } else if (strcmp(role, "tool") == 0) {
            struct span c = trim(m[i].content);
            bool open = i > 0 && strcmp(m[i - 1].role, "tool") != 0;
            bool close = i == n - 1 || strcmp(m[i + 1].role, "tool") != 0;
            rc = (open && put(t, IM_START "user")) || put(t, "\n<tool_response>\n") || put_n(t, c.s, c.n) ||
                 put(t, "\n</tool_response>") || (close && put(t, IM_END "\n"));
        } else {
            return moex_errorf("chat: message %d has role \"%s\" (system, user, assistant, tool)", i, role);
        }
        if (rc) return -1;
    }
    return 0;
}

/* What the generation prompt adds after "<|im_start|>assistant\n". */
static const char *think_prompt(enum chat_format fmt, bool enable_thinking) {
    if (fmt == CHAT_FORMAT_QWEN35) return enable_thinking ? OPEN_THINK : EMPTY_THINK;
    if (fmt == CHAT_FORMAT_QWEN3 && !enable_thinking) return EMPTY_THINK;
    return "";
}

/* LFM2's system turn with the tool list. */
static int put_lfm2_system(struct chat_text *t, const char *system, const char *const *tools, int n_tools) {
    if (put(t, IM_START "system\n") || (system && put(t, system))) return -1;
    if (n_tools > 0 && ((system && system[0] && put(t, "\n")) || put(t, "List of tools: <|tool_list_start|>[")))
        return -1;
    for (int i = 0; i < n_tools; i++)
        if ((i > 0 && put(t, ", ")) || put(t, tools[i])) return -1;
    if (n_tools > 0 && put(t, "]<|tool_list_end|>")) return -1;
    return put(t, IM_END "\n");
}

static int render_lfm2(struct chat_text *t, const struct chat_message *m, const struct chat_calls *calls, int n,
                       const char *const *tools, int n_tools) {
    int first = 0;
    if (n_tools > 0) {
        bool system = strcmp(m[0].role, "system") == 0;
        if (put_lfm2_system(t, system ? m[0].content : NULL, tools, n_tools)) return -1;
        first = system;
    }
    for (int i = first; i < n; i++) {
        const struct chat_calls *c = calls && strcmp(m[i].role, "assistant") == 0 ? &calls[i] : NULL;
        bool tool = n_tools > 0 && strcmp(m[i].role, "tool") == 0;
        if (put(t, IM_START) || put(t, m[i].role) || put(t, "\n")) return -1;
        if (c && c->n > 0) {
            if (put(t, LFM2_CALL_OPEN "[")) return -1;
            for (int k = 0; k < c->n; k++)
                if ((k > 0 && put(t, ", ")) || put(t, "{\"name\": \"") || put(t, c->calls[k].name) ||
                    put(t, "\", \"arguments\": ") || put(t, c->calls[k].arguments) || put(t, "}"))
                    return -1;
            if (put(t, "]" LFM2_CALL_CLOSE)) return -1;
        }
        if ((tool && put(t, "<|tool_response_start|>")) || put(t, m[i].content) ||
            (tool && put(t, "<|tool_response_end|>")) || put(t, IM_END "\n"))
            return -1;
    }
    return 0;
}

bool chat_tool_markers(enum chat_format fmt, const char **open, const char **close) {
    if (fmt == CHAT_FORMAT_QWEN3 || fmt == CHAT_FORMAT_QWEN35) {
        *open = QWEN_CALL_OPEN;
        *close = QWEN_CALL_CLOSE;
        return true;
    }
    if (fmt == CHAT_FORMAT_LFM2) {
        *open = LFM2_CALL_OPEN;
        *close = LFM2_CALL_CLOSE;
        return true;
    }
    return false;
}

char *chat_render(enum chat_format fmt, const struct chat_message *msgs, int n,
                  bool add_generation_prompt, bool enable_thinking, size_t *len) {
    return chat_render_tools(fmt, msgs, NULL, n, NULL, 0, add_generation_prompt, enable_thinking, len);
}

char *chat_render_tools(enum chat_format fmt, const struct chat_message *msgs, const struct chat_calls *calls, int n,
                        const char *const *tools, int n_tools, bool add_generation_prompt, bool enable_thinking,
                        size_t *len) {
    struct chat_text t = {0};
    if (!renderable(fmt)) {
        moex_errorf("chat: the model's chat template is not one moex can render");
        return NULL;
    }
    if (n <= 0) {
        moex_errorf("chat: no messages");   /* the template fails too */
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            moex_errorf("chat: message %d has no role or content", i);
            return NULL;
        }
    }
    int rc = put(&t, fmt == CHAT_FORMAT_LFM2 ? LFM2_BOS : "");
    if (rc == 0 && fmt == CHAT_FORMAT_QWEN3) {
        rc = render_qwen3(&t, msgs, calls, n, tools, n_tools);
    } else if (rc == 0 && fmt == CHAT_FORMAT_QWEN35) {
        rc = render_qwen35(&t, msgs, calls, n, tools, n_tools);
    } else if (rc == 0 && fmt == CHAT_FORMAT_LFM2 && (n_tools > 0 || calls)) {
        rc = render_lfm2(&t, msgs, calls, n, tools, n_tools);
    } else {
        for (int i = 0; i < n && rc == 0; i++) rc = put_turn(&t, msgs[i].role, msgs[i].content);
    }
    if (rc == 0 && add_generation_prompt) {
        rc = put(&t, GENERATION_PROMPT);
        if (rc == 0) rc = put(&t, think_prompt(fmt, enable_thinking));
    }
    if (rc) {
        chat_text_free(&t);
        return NULL;
    }
    if (len) *len = t.len;
    return t.data;
}

int chat_append_user(struct chat_text *t, enum chat_format fmt, const char *system,
                     const char *user, bool enable_thinking) {
    if (!renderable(fmt)) return moex_errorf("chat: the model's chat template is not one moex can render");
    if (!user) return moex_errorf("chat: no user message");
    size_t old_len = t->len;
    int rc = 0;
    int (*turn)(struct chat_text *, const char *, const char *) =
        fmt == CHAT_FORMAT_QWEN35 ? put_trimmed_turn : put_turn;
    if (fmt == CHAT_FORMAT_LFM2 && old_len == 0) rc = put(t, LFM2_BOS);
    if (rc == 0 && system) rc = turn(t, "system", system);
    if (rc == 0) rc = turn(t, "user", user);
    if (rc == 0) rc = put(t, GENERATION_PROMPT);
    if (rc == 0) rc = put(t, think_prompt(fmt, enable_thinking));
    if (rc) {
        t->len = old_len;   /* all or nothing */
        if (t->data) t->data[old_len] = 0;
    }
    return rc;
}

size_t chat_generation_prompt_len(enum chat_format fmt, bool enable_thinking) {
    return strlen(GENERATION_PROMPT) + strlen(think_prompt(fmt, enable_thinking));
}

int chat_append_reply(struct chat_text *t, enum chat_format fmt, const char *reply) {
    if (!renderable(fmt)) return moex_errorf("chat: the model's chat template is not one moex can render");
    if (!reply) return moex_errorf("chat: no reply");
    size_t keep = t->len;
    if (fmt != CHAT_FORMAT_CHATML && t->data && ends_with(t->data, keep, GENERATION_PROMPT EMPTY_THINK))
        keep -= strlen(EMPTY_THINK);
    else if (fmt == CHAT_FORMAT_QWEN35 && t->data && ends_with(t->data, keep, GENERATION_PROMPT OPEN_THINK))
        keep -= strlen(OPEN_THINK);
    if (!t->data || !ends_with(t->data, keep, GENERATION_PROMPT))
        return moex_errorf("chat: a reply must follow a user turn");
    /* Rendered apart first, so that a failure leaves the text as it was. */
    struct chat_text turn = {0};
    int rc;
    if (fmt == CHAT_FORMAT_QWEN3) {
        /* In the form of an earlier turn: a user turn always follows before
         * the text is used again. */
        keep -= strlen(GENERATION_PROMPT);
        rc = render_qwen3_assistant(&turn, reply, false, NULL);
    } else if (fmt == CHAT_FORMAT_QWEN35) {
        keep -= strlen(GENERATION_PROMPT);
        rc = render_qwen35_assistant(&turn, reply, false, NULL);
    } else {
        rc = put(&turn, reply);
        if (rc == 0) rc = put(&turn, IM_END "\n");
    }
    if (rc == 0) {
        size_t old_len = t->len;
        t->len = keep;
        rc = put_n(t, turn.data, turn.len);
        if (rc) t->len = old_len;   /* put_n wrote nothing */
    }
    chat_text_free(&turn);
    return rc;
}
