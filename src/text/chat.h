/* Chat prompts in the model's own format. moex runs no Jinja: it recognises
 * the template family from the GGUF's tokenizer.chat_template and renders it
 * in C. Supported: ChatML, LFM2's (ChatML after "<|startoftext|>", the
 * template's bos_token, at the start of the conversation), and Qwen3's
 * ChatML with <think> handling, rendered
 * exactly as Qwen3's template renders plain messages (no tools, no tool
 * calls) with add_generation_prompt:
 *
 *   <|im_start|>system\n{system}<|im_end|>\n        (only when given)
 *   <|im_start|>user\n{user}<|im_end|>\n
 *   <|im_start|>assistant\n{earlier reply}<|im_end|>\n ...
 *   <|im_start|>assistant\n                           (generation prompt)
 *
 * Qwen3 specifics: earlier replies lose their <think>...</think> part (what
 * follows the last "</think>", leading newlines dropped); with
 * enable_thinking false the generation prompt ends in "<think>\n\n</think>\n\n"
 * (the template's default, enable_thinking undefined, adds nothing and the
 * model thinks). The text is meant to be encoded with parse_special true.
 * User text containing "<|im_start|>" etc. then becomes control tokens, as in
 * llama.cpp. */
#ifndef MOEX_TEXT_CHAT_H
#define MOEX_TEXT_CHAT_H

#include <stdbool.h>
#include <stddef.h>

enum chat_format {
    CHAT_FORMAT_UNKNOWN = 0,   /* not a template moex can render */
    CHAT_FORMAT_CHATML,        /* <|im_start|>role\n...<|im_end|>\n, no thinking rules */
    CHAT_FORMAT_QWEN3,         /* ChatML plus Qwen3's <think> rules */
    CHAT_FORMAT_QWEN35,        /* Qwen3.5/3.6: Qwen3's rules, contents trimmed, the
                                * generation prompt opens "<think>\n" unless thinking
                                * is off; tools not rendered */
    CHAT_FORMAT_LFM2,          /* "<|startoftext|>" once, then ChatML (LFM2, LFM2-MoE) */
};

/* The family of a Jinja template (NULL or "" -> UNKNOWN). Templates that add
 * a default system prompt of their own (Qwen2.5's) are detected as ChatML but
 * that prompt is not added. */
enum chat_format chat_format_detect(const char *tmpl);
const char *chat_format_name(enum chat_format fmt);

struct chat_message {
    const char *role;          /* "system", "user", "assistant" or "tool" */
    const char *content;
};

/* The whole conversation, NUL-terminated and malloc'd, as the template
 * renders it; NULL with moex_error() for an unknown format or bad message. */
char *chat_render(enum chat_format fmt, const struct chat_message *msgs, int n,
                  bool add_generation_prompt, bool enable_thinking, size_t *len);

/* Tools (chat_render_tools). Qwen3 and Qwen3.5 list them in the system turn
 * as Qwen3's template does ("# Tools ... <tools>\n{tool}...</tools>" and its
 * instructions) and write calls as "<tool_call>\n{"name": "f", "arguments":
 * {...}}\n</tool_call>" after the reply's content (Qwen3.5's own template
 * writes XML-style parameters instead; moex keeps one JSON format for both);
 * tool results go back as <tool_response> blocks in a user turn. LFM2 lists
 * them as "List of tools: <|tool_list_start|>[...]<|tool_list_end|>" in the
 * system turn, writes calls as "<|tool_call_start|>[{"name": "f",
 * "arguments": {...}}, ...]<|tool_call_end|>" before the content (the JSON
 * form of its calls), and a tool result as a "tool" turn wrapped in
 * <|tool_response_start|>...<|tool_response_end|>. ChatML: no tools. */
struct chat_tool_call {
    const char *name;
    const char *arguments;     /* JSON text, written as it is */
};
struct chat_calls {
    const struct chat_tool_call *calls;
    int n;
};
/* chat_render with tools[0..n_tools) (each one's JSON as the template prints
 * it, Python's json.dumps spacing) and calls[i], the tool calls of message i
 * (calls may be NULL; only assistant messages' are written). */
char *chat_render_tools(enum chat_format fmt, const struct chat_message *msgs, const struct chat_calls *calls, int n,
                        const char *const *tools, int n_tools, bool add_generation_prompt, bool enable_thinking,
                        size_t *len);
/* The markers a tool call (Qwen: one JSON object; LFM2: a JSON array of
 * them) stands between in the format's replies; false for ChatML. */
bool chat_tool_markers(enum chat_format fmt, const char **open, const char **close);

/* A conversation kept as text, for a chat loop. Zero-initialise; chat_text_free. */
struct chat_text {
    char *data;                /* NUL-terminated once anything was added */
    size_t len, cap;
};
void chat_text_free(struct chat_text *t);
/* Appends a system turn when system is not NULL, the user turn, and the
 * generation prompt. After each call the text equals chat_render of the
 * messages so far with add_generation_prompt (except for user messages that
 * are a whole <tool_response> block, which the template treats as tool output). */
int chat_append_user(struct chat_text *t, enum chat_format fmt, const char *system,
                     const char *user, bool enable_thinking);
/* Bytes of the generation prompt chat_append_user ends the text with
 * ("<|im_start|>assistant\n" and the format's think block, if any): what
 * precedes it is the part of the text that later turns keep as it is. */
size_t chat_generation_prompt_len(enum chat_format fmt, bool enable_thinking);
/* Adds the model's reply (its text without the end-of-turn token) in the form
 * the template gives earlier turns, and "<|im_end|>\n". For Qwen3 this rewrites
 * the end of the text: the reply's thinking and the prompt's empty think block
 * go. A caller that caches the evaluated tokens keeps their longest common
 * prefix with the new text's tokens. */
int chat_append_reply(struct chat_text *t, enum chat_format fmt, const char *reply);

#endif
