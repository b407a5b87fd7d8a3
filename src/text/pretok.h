/* Pre-tokenization of byte-level BPE models: the split that each model's
 * regex makes before BPE runs inside the pieces, written out by hand (no
 * regex engine) with the same leftmost-alternative, greedy semantics. */
#ifndef MOEX_TEXT_PRETOK_H
#define MOEX_TEXT_PRETOK_H

#include <stddef.h>

enum pretok_kind {
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
     *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+          (Qwen2, Qwen3) */
    PRETOK_QWEN2,
    /* The same with \p{N}{1,3} (Llama 3, LFM2). */
    PRETOK_LLAMA3,
    /* The Qwen2 regex with marks in the letter runs (Qwen3.5, Qwen3.6):
     *   ...|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|... */
    PRETOK_QWEN35,
    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRETOK_GPT2,
};

/* Called for each piece in order; a non-zero return stops the split and is
 * returned by pretok_split. */
typedef int (*pretok_emit_fn)(void *ctx, const char *piece, size_t len);

/* Splits text[0..len). Invalid UTF-8 bytes stay in the pieces as they are;
 * the split treats each as one code point of class "other" (U+FFFD), as
 * llama.cpp does. Returns 0, or the first non-zero value emit returned. */
int pretok_split(enum pretok_kind kind, const char *text, size_t len,
                 pretok_emit_fn emit, void *ctx);

#endif
