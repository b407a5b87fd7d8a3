/* Structured output and tool calls of moex serve: response_format (text,
 * json_object, json_schema), grammar (GBNF), tools, tool_choice (auto, none,
 * required, a named function) and parallel_tool_calls. A forced output (a
 * schema, a grammar, tool_choice required or named) becomes a grammar on the
 * job's sampler; replies of a request with tools are searched for calls in
 * the template's markers, which come back as tool_calls (finish_reason
 * "tool_calls"), in one piece or as stream deltas. */
#ifndef MOEX_SERVE_STRUCT_H
#define MOEX_SERVE_STRUCT_H

#include "moex_tools.h"
#include "serve/serve_api.h"
#include "serve/serve_job.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

struct serve_struct;

/* Reads the request's fields into j->structured (left NULL when it has
 * none); -1 with e filled (400, naming the field) when they are not valid
 * or not supported. */
int serve_struct_parse(const moex_model *m, const cJSON *root, bool chat, struct serve_job *j, struct api_error *e);
void serve_struct_free(struct serve_struct *st);
/* The chat prompt: the template with the request's tools and the messages'
 * tool_calls when there are any, else moex_chat_apply. msgs[i] is
 * messages[i]. A forced form (grammar, JSON response format, forced tool
 * call) renders with thinking off: the template's empty think block, as the
 * grammar allows no thinking. NULL with moex_last_error(). */
char *serve_struct_chat_apply(const moex_model *m, const cJSON *root, const struct moex_chat_message *msgs, int n,
                              bool enable_thinking, size_t *len);
/* Puts the job's grammar on its sampler (nothing without one); -1 on error. */
int serve_struct_sampler(const struct serve_struct *st, moex_sampler *s);
/* A whole chat reply: the message's content and tool_calls and the
 * choice's finish_reason when the reply holds calls. */
void serve_struct_message(struct serve_struct *st, cJSON *choice, const char *text, size_t len);
/* A stream chunk: *text, *len become the content to send now (text that may
 * begin a call is held back); at the finish, the calls go into delta and
 * *finish becomes "tool_calls". */
void serve_struct_delta(struct serve_struct *st, cJSON *delta, const char **text, size_t *len, const char **finish);

#endif
