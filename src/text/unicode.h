/* The few Unicode facts a byte-level BPE tokenizer needs: the class of a code
 * point (letter, mark, number, whitespace, other), a UTF-8 decoder that never fails,
 * and GPT-2's byte <-> code point mapping. */
#ifndef MOEX_TEXT_UNICODE_H
#define MOEX_TEXT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum ucls { UCLS_OTHER = 0, UCLS_LETTER = 1, UCLS_NUMBER = 2, UCLS_SPACE = 3, UCLS_MARK = 4 };
#define UCLS_BITS 3

/* Generated (unicode_tables.c): sorted (first code point << UCLS_BITS) | class. */
extern const uint32_t unicode_class_ranges[];
extern const size_t unicode_class_ranges_count;
extern const char unicode_tables_version[];

/* \p{L} -> LETTER, \p{M} -> MARK, \p{N} -> NUMBER, White_Space -> SPACE, anything else
 * (including values past U+10FFFF) -> OTHER. */
enum ucls unicode_class(uint32_t cp);

/* Decodes the sequence at s[0..n) (n >= 1) the way llama.cpp does: a lead
 * byte with the continuation bytes it asks for is one code point (overlong
 * forms and surrogates are not rejected); anything else is one byte read as
 * U+FFFD. Returns the number of bytes used (1..4). */
int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Writes cp (<= U+10FFFF) as UTF-8; returns the byte count (1..4). */
int utf8_encode(uint32_t cp, char *out);

/* Incremental UTF-8 repair for text that arrives in pieces (token by token):
 * complete valid sequences pass through, an incomplete one waits for the next
 * piece, and each ill-formed part becomes U+FFFD (Unicode's "maximal subpart"
 * rule), so what comes out is always valid UTF-8. Zero-initialise to start. */
struct utf8_stream {
    uint8_t pending[4];
    int n_pending;
};
/* Room that utf8_stream_put needs in out for n input bytes. */
#define UTF8_STREAM_OUT_MAX(n) (3 * ((size_t)(n) + 4))
/* Feeds n bytes; writes the bytes that are now final; returns their count. */
size_t utf8_stream_put(struct utf8_stream *s, const uint8_t *in, size_t n, char *out);
/* Ends the stream: an incomplete tail becomes U+FFFD. Writes <= 3 bytes. */
size_t utf8_stream_flush(struct utf8_stream *s, char *out);

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 to U+0100.. in byte order. */
uint32_t byte_to_unicode(uint8_t b);
/* The inverse; -1 for code points that are not the image of a byte. */
int unicode_to_byte(uint32_t cp);

#endif
