/* Grammar-constrained sampling for the public API: the model's token trie,
 * made once on first use and shared by its samplers. */
#include "api/api_impl.h"

#include "text/grammar.h"
#include "text/json_schema.h"
#include "text/sampler.h"

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
