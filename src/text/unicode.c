#include "text/unicode.h"

#include <string.h>

enum ucls unicode_class(uint32_t cp) {
    if (cp < 0x80) {
        /* The hot path: ASCII, decided without the table. */
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return UCLS_LETTER;
        if (cp >= '0' && cp <= '9') return UCLS_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return UCLS_SPACE;
        return UCLS_OTHER;
    }
    if (cp > 0x10FFFF) return UCLS_OTHER;
    /* Last range whose first code point is <= cp. */
    size_t lo = 0, hi = unicode_class_ranges_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((unicode_class_ranges[mid] >> UCLS_BITS) <= cp) lo = mid;
        else hi = mid;
    }
    return (enum ucls)(unicode_class_ranges[lo] & ((1u << UCLS_BITS) - 1));
}

int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    int len;
    uint32_t v;
    if (b < 0x80) { *cp = b; return 1; }
    if ((b & 0xE0) == 0xC0) { len = 2; v = b & 0x1F; }
    else if ((b & 0xF0) == 0xE0) { len = 3; v = b & 0x0F; }
    else if ((b & 0xF8) == 0xF0) { len = 4; v = b & 0x07; }
    else { *cp = 0xFFFD; return 1; }
    if ((size_t)len > n) { *cp = 0xFFFD; return 1; }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

int utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Total length of the sequence a lead byte starts; 0 if it cannot lead. */
static int utf8_lead_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Whether b may follow the bytes already pending. The second byte has tighter
 * bounds after E0, ED, F0 and F4 (no overlongs, surrogates, or > U+10FFFF). */
static int utf8_continues(const struct utf8_stream *s, uint8_t b) {
    uint8_t lo = 0x80, hi = 0xBF;
    if (s->n_pending == 1) {
        switch (s->pending[0]) {
        case 0xE0: lo = 0xA0; break;
        case 0xED: hi = 0x9F; break;
        case 0xF0: lo = 0x90; break;
        case 0xF4: hi = 0x8F; break;
        default: break;
        }
    }
    return b >= lo && b <= hi;
}

static size_t put_replacement(char *out) {
    memcpy(out, "\xEF\xBF\xBD", 3);
    return 3;
}

size_t utf8_stream_put(struct utf8_stream *s, const uint8_t *in, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = in[i];
        if (s->n_pending > 0) {
            if (utf8_continues(s, b)) {
                s->pending[s->n_pending++] = b;
                if (s->n_pending == utf8_lead_len(s->pending[0])) {
                    memcpy(out + w, s->pending, (size_t)s->n_pending);
                    w += (size_t)s->n_pending;
                    s->n_pending = 0;
                }
                continue;
            }
            /* The pending part is ill-formed; b starts afresh. */
            w += put_replacement(out + w);
            s->n_pending = 0;
        }
        int len = utf8_lead_len(b);
        if (len == 1) out[w++] = (char)b;
        else if (len == 0) w += put_replacement(out + w);
        else s->pending[s->n_pending++] = b;
    }
    return w;
}

size_t utf8_stream_flush(struct utf8_stream *s, char *out) {
    if (s->n_pending == 0) return 0;
    s->n_pending = 0;
    return put_replacement(out);
}

/* bytes_to_unicode keeps '!'..'~', 0xA1..0xAC and 0xAE..0xFF as they are. */
static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t byte_to_unicode(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* The others take U+0100.. in byte order. */
    uint32_t n = 0;
    for (unsigned i = 0; i < b; i++) n += !byte_is_printable(i);
    return 0x100 + n;
}

int unicode_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t n = cp - 0x100;
    for (unsigned i = 0; i < 256; i++) {
        if (!byte_is_printable(i)) {
            if (n == 0) return (int)i;
            n--;
        }
    }
    return -1;
}
