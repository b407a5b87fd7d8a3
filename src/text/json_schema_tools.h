/* Tools as OpenAI's requests give them (JSON), for the chat formats of
 * chat.h: rendered into the prompt, and the grammar of forced calls. */
#ifndef MOEX_TEXT_JSON_SCHEMA_TOOLS_H
#define MOEX_TEXT_JSON_SCHEMA_TOOLS_H

#include "text/chat.h"

#include <stdbool.h>
#include <stddef.h>

/* chat_render_tools from JSON: tools_json the "tools" array (or NULL),
 * calls_json[i] message i's "tool_calls" array (calls_json or an entry may
 * be NULL). NULL with moex_error() on JSON that is not that. */
char *chat_render_json(enum chat_format fmt, const struct chat_message *msgs, int n, const char *const *calls_json,
                       const char *tools_json, bool add_generation_prompt, bool enable_thinking, size_t *len);
/* GBNF of a reply that is tool calls in the format's markers, each call's
 * arguments valid for its function's "parameters" schema: a call of the
 * function named name (NULL: any of the tools), one, or up to 5 with
 * parallel. NULL with moex_error() (no markers in the format, an unknown
 * name, an unsupported schema). */
char *chat_tool_grammar(enum chat_format fmt, const char *tools_json, const char *name, bool parallel);

#endif
