/* Qwen3.5/3.6 chat rendering: the expected texts are Qwen3.5's
 * tokenizer.chat_template rendered by Jinja2 3.1 as HuggingFace does
 * (trim_blocks, lstrip_blocks), with add_generation_prompt. */
#include "harness.h"
#include "core/error.h"
#include "text/chat.h"

#include <stdlib.h>
#include <string.h>

struct render_case {
    struct chat_message m[6];
    int n;
    bool thinking;
    const char *want;
};

static const struct render_case cases[] = {
    {{{"user", "Hello!"}}, 1, true,
     "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "Hello!"}}, 1, false,
     "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {{{"system", "  You are helpful.\n"}, {"user", "\n2+2? "}}, 2, false,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "<think>\nThe user greets.\n</think>\n\nHello! How can I help?"}, {"user", "Bye"}}, 4, true,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "a"}, {"assistant", "no think here\n"}, {"user", "b"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nno think here<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "a"}, {"assistant", "x</think>y</think>\n\nz"}, {"user", "b"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nz<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"user", "<tool_response>\nres\n</tool_response>"}}, 3, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n<tool_response>\nres\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"tool", "t1"}, {"tool", " t2\n"}, {"assistant", "done"}}, 5, true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n<tool_response>\nt1\n</tool_response>\n<tool_response>\nt2\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\ndone<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {{{"user", "a"}, {"assistant", "<think>\nr\n</think>\n\nx"}, {"tool", "t1"}, {"assistant", "\n\n<think>\n\nr2\n\n</think>\n\n\nfin\n"}}, 4, false,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n<|im_start|>user\n<tool_response>\nt1\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\nfin<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {{{"user", "q"}, {"assistant", "The user asks.\n</think>\n\nAnswer."}}, 2, true,
     "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nThe user asks.\n</think>\n\nAnswer.<|im_end|>\n<|im_start|>assistant\n<think>\n"},
};

/* The lines of Qwen3.5's template that tell it from Qwen3's. */
static const char qwen35_tail[] =
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<think>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}";
static const char qwen3_tail[] =
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}";

int main(void) {
    enum chat_format fmt = chat_format_detect(qwen35_tail);
    CHECK(fmt == CHAT_FORMAT_QWEN35);
    CHECK(strcmp(chat_format_name(fmt), "qwen3.5") == 0);
    CHECK(chat_format_detect(qwen3_tail) == CHAT_FORMAT_QWEN3);

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0;
        char *s = chat_render(fmt, cases[i].m, cases[i].n, true, cases[i].thinking, &len);
        CHECKF(s && strcmp(s, cases[i].want) == 0 && len == strlen(cases[i].want), "case %zu:\n%s\nwant\n%s", i,
               s ? s : moex_error(), cases[i].want);
        free(s);
    }
    /* The template's refusals. */
    struct chat_message late_system[2] = {{"user", "a"}, {"system", "s"}};
    CHECK(chat_render(fmt, late_system, 2, true, true, NULL) == NULL && strstr(moex_error(), "system"));
    struct chat_message no_query[1] = {{"assistant", "x"}};
    CHECK(chat_render(fmt, no_query, 1, true, true, NULL) == NULL && strstr(moex_error(), "query"));

    /* A chat loop's text equals the rendering of its messages after every
     * turn: the reply follows the prompt's open think block, and becomes an
     * earlier turn without its reasoning. */
    struct chat_text c = {0};
    CHECK(chat_append_user(&c, fmt, " Be brief. ", "Hi\n", true) == 0);
    struct chat_message conv[4] = {{"system", " Be brief. "}, {"user", "Hi\n"},
                                   {"assistant", "The user greets.\n</think>\n\nHello!\n"}, {"user", "Bye"}};
    char *want = chat_render(fmt, conv, 2, true, true, NULL);
    CHECK(want && c.data && strcmp(c.data, want) == 0);
    free(want);
    CHECK(chat_append_reply(&c, fmt, conv[2].content) == 0);
    CHECK(chat_append_user(&c, fmt, NULL, "Bye", false) == 0);
    want = chat_render(fmt, conv, 4, true, false, NULL);
    CHECKF(want && c.data && strcmp(c.data, want) == 0, "\n%s\nwant\n%s", c.data, want);
    free(want);
    CHECK(chat_append_reply(&c, fmt, "Goodbye.") == 0);
    CHECK(c.data && strstr(c.data, "<|im_start|>assistant\nGoodbye.<|im_end|>\n") != NULL);
    CHECK(chat_append_reply(&c, fmt, "twice") == -1);
    chat_text_free(&c);
    return test_finish();
}
