#include "text/pretok.h"

#include "text/unicode.h"

#include <stdint.h>

/* Past the end of the text: a class that no regex class matches, so that
 * every "followed by" test fails there as it does for a real regex. */
#define CLS_END 5

/* Sets of classes, as bit masks: what a regex class takes. */
#define IN(cls, set) (((1u << (cls)) & (set)) != 0)
#define SET(cls) (1u << (cls))

struct cp_at {
    uint32_t cp;
    int cls;   /* enum ucls, or CLS_END */
    size_t len;
};

static struct cp_at cp_at(const uint8_t *s, size_t n, size_t pos) {
    struct cp_at c = {0, CLS_END, 0};
    if (pos >= n) return c;
    int len = utf8_decode(s + pos, n - pos, &c.cp);
    c.len = (size_t)len;
    c.cls = (int)unicode_class(c.cp);
    return c;
}

/* End of the run of code points of the classes in set starting at pos. */
static size_t run_of(const uint8_t *s, size_t n, size_t pos, unsigned set) {
    for (;;) {
        struct cp_at c = cp_at(s, n, pos);
        if (!IN(c.cls, set)) return pos;
        pos += c.len;
    }
}

static int lower_ascii(uint8_t b) { return (b >= 'A' && b <= 'Z') ? b + 32 : b; }

/* 's|'t|'re|'ve|'m|'ll|'d at pos (s[pos] == '\''); returns the match length or
 * 0. Only ASCII letters can match, so bytes are compared directly. */
static size_t contraction(const uint8_t *s, size_t n, size_t pos, int fold_case) {
    if (pos + 1 >= n) return 0;
    int a = fold_case ? lower_ascii(s[pos + 1]) : s[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= n) return 0;
    int b = fold_case ? lower_ascii(s[pos + 2]) : s[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* A run of whitespace at pos, for \s*[\r\n]+ (when newlines allowed), then
 * \s+(?!\S), then \s+. Returns the end of the match, or pos if none. */
static size_t whitespace(const uint8_t *s, size_t n, size_t pos, int newline_rule) {
    size_t p = pos, last_cp = pos, after_newline = 0;
    int count = 0;
    for (;;) {
        struct cp_at c = cp_at(s, n, p);
        if (c.cls != UCLS_SPACE) break;
        if (c.cp == '\r' || c.cp == '\n') after_newline = p + c.len;
        last_cp = p;
        p += c.len;
        count++;
    }
    if (count == 0) return pos;
    /* \s*[\r\n]+: \s* backs off to the last newline of the run. */
    if (newline_rule && after_newline) return after_newline;
    /* \s+(?!\S): before text, the run gives up its last code point. */
    if (count > 1 && p < n) return last_cp;
    return p;
}

/* One match of the Qwen2 / Llama 3 regex at pos; returns its end. With
 * letter_marks (Qwen3.5) the letter runs take marks too ([\p{L}\p{M}]+ and
 * [^\s\p{L}\p{M}\p{N}]+); the optional lead of a letter run may then be a
 * mark as well, which ends at the same place as the run starting at it. */
static size_t match_qwen2(const uint8_t *s, size_t n, size_t pos, int max_digits, int letter_marks) {
    unsigned letters = SET(UCLS_LETTER) | (letter_marks ? SET(UCLS_MARK) : 0);
    unsigned others = SET(UCLS_OTHER) | (letter_marks ? 0 : SET(UCLS_MARK));
    struct cp_at c = cp_at(s, n, pos);
    if (c.cp == '\'') {
        size_t k = contraction(s, n, pos, 1);
        if (k) return pos + k;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c.cp != '\r' && c.cp != '\n' && c.cls != UCLS_NUMBER) {
        if (IN(c.cls, letters)) return run_of(s, n, pos, letters);
        if (IN(cp_at(s, n, pos + c.len).cls, letters))
            return run_of(s, n, pos + c.len, letters);
    }
    /* \p{N}{1,max_digits} */
    if (c.cls == UCLS_NUMBER) {
        size_t p = pos;
        for (int i = 0; i < max_digits; i++) {
            struct cp_at d = cp_at(s, n, p);
            if (d.cls != UCLS_NUMBER) break;
            p += d.len;
        }
        return p;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    size_t start = pos + (c.cp == ' ' ? 1 : 0);
    if (IN(cp_at(s, n, start).cls, others)) {
        size_t p = run_of(s, n, start, others);
        while (p < n && (s[p] == '\r' || s[p] == '\n')) p++;
        return p;
    }
    size_t end = whitespace(s, n, pos, 1);
    if (end > pos) return end;
    return pos + c.len;   /* unreachable: every code point has a class */
}

/* One match of the GPT-2 regex at pos; returns its end. */
static size_t match_gpt2(const uint8_t *s, size_t n, size_t pos) {
    struct cp_at c = cp_at(s, n, pos);
    if (c.cp == '\'') {
        size_t k = contraction(s, n, pos, 0);
        if (k) return pos + k;
    }
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
    size_t start = pos + (c.cp == ' ' ? 1 : 0);
    int cls = cp_at(s, n, start).cls;
    if (cls == UCLS_LETTER || cls == UCLS_NUMBER) return run_of(s, n, start, SET(cls));
    if (cls == UCLS_OTHER || cls == UCLS_MARK) return run_of(s, n, start, SET(UCLS_OTHER) | SET(UCLS_MARK));
    size_t end = whitespace(s, n, pos, 0);
    if (end > pos) return end;
    return pos + c.len;
}

int pretok_split(enum pretok_kind kind, const char *text, size_t len,
                 pretok_emit_fn emit, void *ctx) {
    const uint8_t *s = (const uint8_t *)text;
    size_t pos = 0;
    while (pos < len) {
        size_t end;
        switch (kind) {
        case PRETOK_LLAMA3: end = match_qwen2(s, len, pos, 3, 0); break;
        case PRETOK_GPT2: end = match_gpt2(s, len, pos); break;
        case PRETOK_QWEN35: end = match_qwen2(s, len, pos, 1, 1); break;
        case PRETOK_QWEN2:
        default: end = match_qwen2(s, len, pos, 1, 0); break;
        }
        int rc = emit(ctx, text + pos, end - pos);
        if (rc) return rc;
        pos = end;
    }
    return 0;
}
