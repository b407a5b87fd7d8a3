/* libFuzzer target for the tokenizer loader: the input is read as a GGUF
 * and its tokenizer.* keys loaded. Whatever loads must encode and decode
 * text (plain, special tokens, bytes that are not UTF-8) and stream every
 * token, in bounds; a refusal must come with a message. */
#include "core/error.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char *const texts[] = {
    "Hello, world! 123 4567 don't",
    "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>",
    "  \t\n\n spaces   and\r\nlines",
    "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xff\xfe bad \xc3",
};

static void exercise(const struct tokenizer *t) {
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int special = 0; special < 2; special++) {
            int n = 0;
            int32_t *ids = tokenizer_encode_alloc(t, texts[i], strlen(texts[i]), special, &n);
            if (!ids) continue;
            for (int k = 0; k < n; k++)
                if (ids[k] < 0 || ids[k] >= tokenizer_n_vocab(t)) abort();
            size_t len = 0;
            free(tokenizer_decode_alloc(t, ids, n, &len));
            free(ids);
        }
    size_t cap = tokenizer_stream_bound(t);
    char *out = malloc(cap ? cap : 1);
    if (!out) return;
    struct tokenizer_stream s;
    tokenizer_stream_init(&s);
    int V = tokenizer_n_vocab(t);
    for (int32_t id = 0; id < V && id < 4096; id++)
        if (tokenizer_stream_put(t, &s, id, out, cap) < 0) abort();
    tokenizer_stream_flush(&s, out, cap);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct gguf_file *f = gguf_open_memory(data, size, "fuzz.gguf");
    if (!f) return 0;
    moex_clear_error();
    struct tokenizer *t = tokenizer_load(f);
    if (t) exercise(t);
    else if (!moex_error()[0]) abort(); /* a refusal says why */
    tokenizer_free(t);
    gguf_close(f);
    return 0;
}
