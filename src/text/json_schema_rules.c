/* The GBNF rules every converted JSON schema may use. */
#include "text/json_schema.h"

/* Rules every converted schema may use. Digits are bounded (16) and so is
 * whitespace: a model cannot run on in them. */
static const char COMMON_RULES[] =
    "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "json-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "json-string ::= \"\\\"\" json-char* \"\\\"\" space\n"
    "json-int ::= \"-\"? ([0] | [1-9] [0-9]{0,15})\n"
    "json-integer ::= json-int space\n"
    "json-number ::= json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space\n"
    "json-boolean ::= (\"true\" | \"false\") space\n"
    "json-date ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n"
    "json-time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "json-null ::= \"null\" space\n"
    "json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null\n"
    "json-object ::= \"{\" space (json-string \":\" space json-value (\",\" space json-string \":\" space json-value)*)? \"}\" space\n"
    "json-array ::= \"[\" space (json-value (\",\" space json-value)*)? \"]\" space\n";

void json_schema_common_rules(struct json_buf *out) { json_buf_puts(out, COMMON_RULES); }
