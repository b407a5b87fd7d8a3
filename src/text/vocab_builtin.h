/* The built-in byte-level BPE vocabulary of synthetic models: the 256 byte
 * tokens in GPT-2's byte-to-unicode order (the order Qwen's vocabulary starts
 * with), then merges learned from a built-in English text, then the control
 * tokens <|endoftext|>, <|im_start|>, <|im_end|>. It loads like any GGUF
 * "gpt2" tokenizer with the "qwen2" pre-tokenizer, and its chat template is
 * ChatML. The same call always gives the same vocabulary. */
#ifndef MOEX_TEXT_VOCAB_BUILTIN_H
#define MOEX_TEXT_VOCAB_BUILTIN_H

#include <stdint.h>

struct builtin_vocab {
    int n_tokens;          /* 256 + learned tokens + 3 */
    char **tokens;         /* (n_tokens) NUL-terminated, GPT-2 byte alphabet */
    int32_t *types;        /* (n_tokens) tokenizer.ggml.token_type values */
    int n_merges;
    char **merges;         /* (n_merges) "left right", by rank */
    int32_t eos_id, bos_id, pad_id, im_start_id, im_end_id;
};

/* Learns merges until max_learned new tokens exist, or until every word of
 * the text is one token (BUILTIN_VOCAB_ALL: as many as the text gives).
 * 0, or -1 with moex_error() when out of memory. */
#define BUILTIN_VOCAB_ALL (1 << 30)
int builtin_vocab_make(int max_learned, struct builtin_vocab *v);
void builtin_vocab_free(struct builtin_vocab *v);

/* A ChatML template (recognised by llama.cpp and moex as chatml). */
extern const char builtin_chat_template[];

#endif
