/* Grammar-constrained sampling for the public API: the model's token trie,
 * made once on first use and shared by its samplers. */
#include "api/api_impl.h"

#include "text/chat.h"
#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/json_schema_tools.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Several threads may ask at once: each builds, the first to publish wins. */
static const struct grammar_vocab *model_vocab(const moex_model *cm) {
    moex_model *m = (moex_model *)cm;
    struct grammar_vocab *v = atomic_load(&m->grammar_vocab);
    if (v) return v;
    if (!m->model->tok) return moex_errorf("the model has no tokenizer"), NULL;
    struct grammar_vocab *mine = grammar_vocab_from_tokenizer(m->model->tok);
    if (!mine) return NULL;
    if (atomic_compare_exchange_strong(&m->grammar_vocab, &v, mine)) return mine;
    grammar_vocab_free(mine);
    return v;
}

void api_grammar_vocab_free(moex_model *m) { grammar_vocab_free(atomic_load(&m->grammar_vocab)); }

int moex_sampler_set_grammar(moex_sampler *s, const char *gbnf, const char *root) {
    API_CHECK(s, -1);
    if (!gbnf) {
        sampler_set_grammar(s->s, NULL);
        return 0;
    }
    const struct grammar_vocab *v = model_vocab(s->m);
    struct grammar *g = v ? grammar_parse(gbnf, root) : NULL;
    if (!g) return -1;
    struct grammar_sampler *gs = grammar_sampler_new(g, v);
    if (!gs) return -1;
    sampler_set_grammar(s->s, gs);
    return 0;
}

char *moex_json_schema_to_grammar(const char *schema_json) { return json_schema_to_grammar(schema_json); }

/* The model's chat format (ChatML for a template moex does not know, as moex_chat_apply). */
static enum chat_format format_of(const moex_model *m) {
    enum chat_format fmt = m->model->tok ? chat_format_detect(tokenizer_chat_template(m->model->tok)) : CHAT_FORMAT_UNKNOWN;
    return fmt == CHAT_FORMAT_UNKNOWN ? CHAT_FORMAT_CHATML : fmt;
}

char *moex_chat_apply_tools(const moex_model *m, const struct moex_chat_message *msgs,
                            const char *const *tool_calls_json, int n, const char *tools_json,
                            bool add_generation_prompt, bool enable_thinking, size_t *len) {
    API_CHECK(m, NULL);
    if (n > 0) API_CHECK(msgs, NULL);
    struct chat_message *cm = malloc(sizeof *cm * (size_t)(n > 0 ? n : 1));
    if (!cm) return moex_errorf("out of memory"), NULL;
    for (int i = 0; i < n; i++) cm[i] = (struct chat_message){ msgs[i].role, msgs[i].content };
    char *text = chat_render_json(format_of(m), cm, n, tool_calls_json, tools_json, add_generation_prompt,
                                  enable_thinking, len);
    free(cm);
    return text;
}

char *moex_chat_tool_grammar(const moex_model *m, const char *tools_json, const char *name, bool parallel) {
    API_CHECK(m, NULL);
    API_CHECK(tools_json, NULL);
    return chat_tool_grammar(format_of(m), tools_json, name, parallel);
}

bool moex_chat_tool_markers(const moex_model *m, const char **open, const char **close) {
    API_CHECK(m, false);
    API_CHECK(open, false);
    API_CHECK(close, false);
    return chat_tool_markers(format_of(m), open, close);
}
