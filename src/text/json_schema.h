/* JSON schemas to GBNF (json_schema.c), on a small JSON reader and writer of
 * their own (json_schema_read.c): the library links no JSON library.
 *
 * The schemas are the strict subset OpenAI's structured outputs take: object
 * (properties in their order, required, additionalProperties false or
 * absent), array (items, minItems, maxItems), string (enum, const,
 * minLength, maxLength), number, integer (minimum, maximum and the
 * exclusive ones: digit ranges), string formats date, time, date-time and
 * uuid, boolean, null, enum, const, anyOf, type
 * lists, $ref into #/$defs or #/definitions, nesting. Other validation
 * keywords (pattern, format, multipleOf, ...) are refused, naming the keyword;
 * annotations (title, description, default, examples, $schema, $id,
 * $comment) are ignored. Whitespace between tokens is bounded (a space, or a
 * newline and at most 20 spaces or tabs), and so are digit runs (16), so
 * that a model cannot loop on them forever. */
#ifndef MOEX_TEXT_JSON_SCHEMA_H
#define MOEX_TEXT_JSON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
    enum json_type type;
    bool boolean;
    double number;
    char *str;                 /* a string's bytes (NUL-terminated, len of them), a number's text */
    size_t len;
    struct json *items;        /* (n) an array's items, an object's values */
    char **keys;               /* (n) an object's keys, in their order */
    size_t *key_lens;
    int n;
};

/* Parses text[0..len); NULL with moex_error() saying where it is not JSON. */
struct json *json_parse(const char *text, size_t len);
void json_free(struct json *v);
/* The member of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);

/* A growing string; oom set when an append failed (the rest are then dropped). */
struct json_buf {
    char *s;
    size_t n, cap;
    bool oom;
};
void json_buf_put(struct json_buf *b, const char *s, size_t n);
void json_buf_puts(struct json_buf *b, const char *s);
/* v as JSON: compact, or spaced as Python's json.dumps writes it (", ",
 * ": "), which is what the chat templates' tojson prints. */
void json_write(struct json_buf *b, const struct json *v, bool spaced);
/* A JSON string literal of s[0..n). */
void json_write_string(struct json_buf *b, const char *s, size_t n);

/* The grammar (malloc'd GBNF, root rule "root") of the values the schema
 * allows; NULL schema: any JSON object. NULL with moex_error() naming the
 * keyword of an unsupported schema, or where the text is not JSON. */
char *json_schema_to_grammar(const char *schema_json);
/* The same from a parsed schema, its rules named prefix-*, the value's rule
 * being prefix itself; appended to out. defs_root: where $ref looks
 * ("#/$defs/x" in it), usually the schema. -1 with moex_error(). */
int json_schema_rules(const struct json *schema, const struct json *defs_root, const char *prefix,
                      struct json_buf *out);
/* A GBNF string literal of the bytes s[0..n). */
void json_schema_literal(struct json_buf *out, const char *s, size_t n);
/* The rules json_schema_rules' output refers to beyond its own (space,
 * string, number, value, ...): append once after all of them. */
void json_schema_common_rules(struct json_buf *out);

#endif
