/* Byte-level BPE tokenizer of GGUF models (tokenizer.ggml.model "gpt2"), as
 * llama.cpp and HuggingFace run it for Qwen2/Qwen3: special tokens are split
 * out first, the rest is pre-tokenized by the model's regex (pretok.h), each
 * piece's bytes are mapped to GPT-2's byte alphabet, and merges apply by rank.
 *
 * The tokenizer copies what it needs: the gguf_file may be closed after
 * tokenizer_load. A loaded tokenizer is read-only, so threads may share it.
 *
 * Where moex differs from llama.cpp: bytes of invalid UTF-8 in the input are
 * encoded as themselves (llama.cpp substitutes U+FFFD), so decoding always
 * gives back the input bytes. The split around them is the same. */
#ifndef MOEX_TEXT_TOKENIZER_H
#define MOEX_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/unicode.h"

struct gguf_file;
struct tokenizer;

/* tokenizer.ggml.token_type values. */
enum token_type {
    TOKEN_UNDEFINED = 0, TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3,
    TOKEN_USER_DEFINED = 4, TOKEN_UNUSED = 5, TOKEN_BYTE = 6,
};

/* Reads and validates the tokenizer.* keys. Pre-tokenizers: "qwen2",
 * "llama-bpe"/"llama3", "gpt-2"/"gpt2". NULL with moex_error() on anything
 * missing, of the wrong type, out of range or inconsistent (a merge whose
 * parts or result are not tokens, a missing byte token). */
struct tokenizer *tokenizer_load(const struct gguf_file *f);
void tokenizer_free(struct tokenizer *t);

/* Encodes text[0..len) into out[0..max_out). parse_special: control tokens
 * written in the text (e.g. "<|im_start|>") become their ids; user-defined
 * tokens (Qwen3's "<think>") always do, as in HuggingFace and llama.cpp. No
 * BOS is added (see tokenizer_add_bos). Returns the number of ids, or -1 if
 * they do not fit (the message says how many are needed) or on error. */
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len,
                     bool parse_special, int32_t *out, int max_out);
/* The same into a malloc'd array (free it); NULL on error. */
int32_t *tokenizer_encode_alloc(const struct tokenizer *t, const char *text, size_t len,
                                bool parse_special, int *n_out);

/* The bytes one token stands for: byte-level decoded for normal tokens, the
 * text itself for control, unknown and user-defined tokens, nothing for unused
 * ones. Not NUL-terminated, may end inside a UTF-8 sequence. NULL (with an
 * error) for an id out of range. */
const char *tokenizer_decode_token(const struct tokenizer *t, int32_t id, size_t *len);
/* The bytes of ids[0..n) concatenated, NUL-terminated, malloc'd; NULL on error. */
char *tokenizer_decode_alloc(const struct tokenizer *t, const int32_t *ids, int n, size_t *len);

/* Streaming decode for printing tokens as they come: only complete, valid
 * UTF-8 comes out; a sequence split across tokens waits for its end, and
 * ill-formed bytes become U+FFFD. Zero-initialise (or tokenizer_stream_init). */
struct tokenizer_stream {
    struct utf8_stream utf8;
};
void tokenizer_stream_init(struct tokenizer_stream *s);
/* Space out must have for any one call: put or flush. */
size_t tokenizer_stream_bound(const struct tokenizer *t);
/* Writes the text that token id completes; returns its length, or -1 if id
 * is out of range or cap < tokenizer_stream_bound(t). */
int tokenizer_stream_put(const struct tokenizer *t, struct tokenizer_stream *s, int32_t id,
                         char *out, size_t cap);
/* Ends the stream (an unfinished sequence becomes U+FFFD); returns 0..3. */
int tokenizer_stream_flush(struct tokenizer_stream *s, char *out, size_t cap);

int tokenizer_n_vocab(const struct tokenizer *t);
/* Special ids; -1 when the model has none. Qwen3: bos = pad = <|endoftext|>,
 * eos = <|im_end|> (as its GGUF says), eot = <|im_end|>. eot comes from
 * tokenizer.ggml.eot_token_id, else the first of <|im_end|>, <|eot_id|>,
 * <|end|>, <end_of_turn>, <|endoftext|> that exists, else eos. */
int32_t tokenizer_bos(const struct tokenizer *t);
int32_t tokenizer_eos(const struct tokenizer *t);
int32_t tokenizer_eot(const struct tokenizer *t);
int32_t tokenizer_pad(const struct tokenizer *t);
/* tokenizer.ggml.add_bos_token (false when absent). */
bool tokenizer_add_bos(const struct tokenizer *t);
/* End of generation: eos, eot, or one of the end markers above. */
bool tokenizer_is_eog(const struct tokenizer *t, int32_t id);

/* The token's text as stored in the GGUF (byte-level alphabet for normal
 * tokens), NUL-terminated; NULL for an id out of range. */
const char *tokenizer_token_text(const struct tokenizer *t, int32_t id, size_t *len);
/* enum token_type; -1 for an id out of range. */
int tokenizer_token_type(const struct tokenizer *t, int32_t id);
bool tokenizer_is_control(const struct tokenizer *t, int32_t id);
/* The id whose stored text is exactly text[0..len), or -1. O(1). */
int32_t tokenizer_find(const struct tokenizer *t, const char *text, size_t len);
/* tokenizer.chat_template, or NULL when the file has none. */
const char *tokenizer_chat_template(const struct tokenizer *t);

#endif
