/* A model's vocabulary as the grammar mask sees it: plain and user-defined
 * tokens are their bytes, end-of-generation tokens end, the other control
 * tokens are never part of a grammar's text. */
#include "text/grammar.h"
#include "text/tokenizer.h"

#include "core/error.h"

#include <stdlib.h>

struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *t) {
    int n = tokenizer_n_vocab(t);
    const char **pieces = malloc(sizeof *pieces * (size_t)n);
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    uint8_t *kinds = malloc((size_t)n);
    struct grammar_vocab *v = NULL;
    if (!pieces || !lens || !kinds) {
        moex_errorf("grammar: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        int type = tokenizer_token_type(t, i);
        pieces[i] = "";
        lens[i] = 0;
        if (tokenizer_is_eog(t, i)) {
            kinds[i] = GRAMMAR_TOKEN_END;
        } else if (type == TOKEN_NORMAL || type == TOKEN_USER_DEFINED || type == TOKEN_BYTE || type == TOKEN_UNDEFINED) {
            kinds[i] = GRAMMAR_TOKEN_TEXT;
            if (!(pieces[i] = tokenizer_decode_token(t, i, &lens[i]))) goto done;
        } else {
            kinds[i] = GRAMMAR_TOKEN_NEVER;
        }
    }
    v = grammar_vocab_new(n, pieces, lens, kinds);
done:
    free(pieces);
    free(lens);
    free(kinds);
    return v;
}
