/* The tokenizer of a synthetic model: the built-in vocabulary, or the
 * tokenizer.* keys of another GGUF, optionally cut to its first entries plus
 * its special tokens (merges kept only when their parts and result are kept)
 * or padded with unused [PAD] tokens. */
#ifndef MOEX_SYNTH_VOCAB_H
#define MOEX_SYNTH_VOCAB_H

#include <stdint.h>

struct gguf_file;
struct gguf_writer;

struct synth_vocab {
    int n_tokens;
    char **tokens;            /* (n_tokens) */
    int32_t *types;           /* (n_tokens) tokenizer.ggml.token_type values */
    int n_merges;
    char **merges;            /* (n_merges) */
    struct gguf_file *src;    /* the --vocab-from file, or NULL for the built-in one */
    int32_t *new_id;          /* (source tokens) id in this vocabulary, or -1 */
    int32_t *old_id;          /* (n_tokens) source id, or -1 for padding */
};

/* n_vocab 0 keeps every entry. 0, or -1 with moex_error(). */
int synth_vocab_build(const char *vocab_from, int n_vocab, struct synth_vocab *v);
/* Sets every tokenizer.* key of the vocabulary on w. */
void synth_vocab_set_keys(const struct synth_vocab *v, struct gguf_writer *w);
void synth_vocab_free(struct synth_vocab *v);

#endif
