#include "lineedit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

enum { KEY_CTRL_A = 1, KEY_CTRL_B = 2, KEY_CTRL_C = 3, KEY_CTRL_D = 4, KEY_CTRL_E = 5, KEY_CTRL_F = 6,
       KEY_CTRL_H = 8, KEY_CTRL_K = 11, KEY_CTRL_L = 12, KEY_CTRL_N = 14, KEY_CTRL_P = 16, KEY_CTRL_U = 21,
       KEY_ESC = 27, KEY_BACKSPACE = 127 };

struct lineedit {
    int fd;
    FILE *out;
    bool tty;
    char *buf;                 /* the line: len bytes, NUL after them */
    size_t len, cap, pos;      /* pos: the cursor, a byte offset */
    char **history;            /* oldest first */
    int n_history, history_cap, history_at;
    char *draft;               /* the line being typed while the history is browsed */
    unsigned char in[65536];   /* bytes read and not yet taken */
    size_t in_len, in_pos;
};

struct lineedit *lineedit_new(int fd, FILE *out) {
    struct lineedit *le = calloc(1, sizeof *le);
    if (!le) return NULL;
    le->fd = fd;
    le->out = out;
    le->tty = isatty(fd) && isatty(fileno(out));
    le->cap = 256;
    if (!(le->buf = malloc(le->cap))) { free(le); return NULL; }
    le->buf[0] = 0;
    return le;
}

void lineedit_free(struct lineedit *le) {
    if (!le) return;
    for (int i = 0; i < le->n_history; i++) free(le->history[i]);
    free(le->history);
    free(le->draft);
    free(le->buf);
    free(le);
}

bool lineedit_is_tty(const struct lineedit *le) { return le->tty; }

/* The next input byte: 1, 0 at end of input, -1 with errno (EINTR included: a signal). */
static int next_byte(struct lineedit *le, unsigned char *c) {
    if (le->in_pos == le->in_len) {
        ssize_t n = read(le->fd, le->in, sizeof le->in);
        if (n <= 0) return n == 0 ? 0 : -1;
        le->in_len = (size_t)n;
        le->in_pos = 0;
    }
    *c = le->in[le->in_pos++];
    return 1;
}

static int reserve(struct lineedit *le, size_t more) {
    if (le->len + more + 1 <= le->cap) return 0;
    size_t cap = le->cap;
    while (cap < le->len + more + 1) cap *= 2;
    char *g = realloc(le->buf, cap);
    if (!g) return -1;
    le->buf = g;
    le->cap = cap;
    return 0;
}

static int set_line(struct lineedit *le, const char *s) {
    size_t n = strlen(s);
    le->len = 0;
    if (reserve(le, n)) return -1;
    memcpy(le->buf, s, n + 1);
    le->len = le->pos = n;
    return 0;
}

/* Columns of bytes s[0..n): one per UTF-8 sequence (continuation bytes take none). */
static size_t columns(const char *s, size_t n) {
    size_t cols = 0;
    for (size_t i = 0; i < n; i++) cols += ((unsigned char)s[i] & 0xc0) != 0x80;
    return cols;
}

static void refresh(struct lineedit *le, const char *prompt) {
    fprintf(le->out, "\r%s", prompt);
    fwrite(le->buf, 1, le->len, le->out);
    fputs("\x1b[K", le->out);
    size_t back = columns(le->buf + le->pos, le->len - le->pos);
    if (back) fprintf(le->out, "\x1b[%zuD", back);
    fflush(le->out);
}

/* One UTF-8 sequence left or right of the cursor. */
static size_t prev_char(const struct lineedit *le, size_t at) {
    while (at > 0 && ((unsigned char)le->buf[--at] & 0xc0) == 0x80) {}
    return at;
}

static size_t next_char(const struct lineedit *le, size_t at) {
    if (at < le->len) at++;
    while (at < le->len && ((unsigned char)le->buf[at] & 0xc0) == 0x80) at++;
    return at;
}

static void erase(struct lineedit *le, size_t from, size_t to) {
    memmove(le->buf + from, le->buf + to, le->len - to + 1);
    le->len -= to - from;
    le->pos = from;
}

static int browse_history(struct lineedit *le, int step) {
    int at = le->history_at + step;
    if (at < 0 || at > le->n_history) return 0;
    if (le->history_at == le->n_history) { /* leaving the line being typed: keep it */
        free(le->draft);
        if (!(le->draft = strdup(le->buf))) return -1;
    }
    le->history_at = at;
    return set_line(le, at == le->n_history ? le->draft : le->history[at]);
}

/* After ESC: the rest of an escape sequence, as the key it stands for
 * (KEY_CTRL_B/F/P/N for the arrows, KEY_CTRL_A/E for Home/End, KEY_CTRL_D
 * for Delete), or 0 for one that is not known. */
static int escape_key(struct lineedit *le) {
    unsigned char c, kind;
    if (next_byte(le, &kind) != 1 || (kind != '[' && kind != 'O')) return 0;
    if (next_byte(le, &c) != 1) return 0;
    if (c >= '0' && c <= '9') { /* ESC [ n ~ */
        unsigned char n = c;
        while (next_byte(le, &c) == 1 && c >= '0' && c <= '9') {}
        if (c != '~') return 0;
        return n == '3' ? KEY_CTRL_D : n == '1' || n == '7' ? KEY_CTRL_A : n == '4' || n == '8' ? KEY_CTRL_E : 0;
    }
    switch (c) {
    case 'A': return KEY_CTRL_P;
    case 'B': return KEY_CTRL_N;
    case 'C': return KEY_CTRL_F;
    case 'D': return KEY_CTRL_B;
    case 'H': return KEY_CTRL_A;
    case 'F': return KEY_CTRL_E;
    default: return 0;
    }
}

static enum lineedit_status read_raw(struct lineedit *le, const char *prompt) {
    struct termios saved, raw;
    if (tcgetattr(le->fd, &saved) != 0) return LINEEDIT_ERROR;
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL | INLCR);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(le->fd, TCSADRAIN, &raw) != 0) return LINEEDIT_ERROR;
    le->history_at = le->n_history;
    refresh(le, prompt);
    enum lineedit_status status = LINEEDIT_ERROR;
    for (;;) {
        unsigned char c;
        int got = next_byte(le, &c);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) { status = got == 0 ? LINEEDIT_EOF : LINEEDIT_ERROR; break; }
        int key = c == KEY_ESC ? escape_key(le) : c;
        if (key == '\r' || key == '\n') { status = LINEEDIT_LINE; break; }
        if (key == KEY_CTRL_C) { status = LINEEDIT_INTERRUPT; break; }
        if (key == KEY_CTRL_D && le->len == 0) { status = LINEEDIT_EOF; break; }
        switch (key) {
        case KEY_CTRL_A: le->pos = 0; break;
        case KEY_CTRL_E: le->pos = le->len; break;
        case KEY_CTRL_B: le->pos = prev_char(le, le->pos); break;
        case KEY_CTRL_F: le->pos = next_char(le, le->pos); break;
        case KEY_CTRL_D: erase(le, le->pos, next_char(le, le->pos)); break;
        case KEY_BACKSPACE: case KEY_CTRL_H: erase(le, prev_char(le, le->pos), le->pos); break;
        case KEY_CTRL_U: erase(le, 0, le->pos); break;
        case KEY_CTRL_K: le->len = le->pos; le->buf[le->len] = 0; break;
        case KEY_CTRL_L: fputs("\x1b[H\x1b[2J", le->out); break;
        case KEY_CTRL_P: case KEY_CTRL_N:
            if (browse_history(le, key == KEY_CTRL_P ? -1 : 1)) goto out;
            break;
        default:
            if (key < 0x20) break; /* other control keys and unknown sequences: ignored */
            if (reserve(le, 1)) goto out;
            memmove(le->buf + le->pos + 1, le->buf + le->pos, le->len - le->pos + 1);
            le->buf[le->pos++] = (char)key;
            le->len++;
        }
        refresh(le, prompt);
    }
out:
    le->pos = le->len;
    refresh(le, prompt);
    fputs(status == LINEEDIT_INTERRUPT ? "^C\n" : "\n", le->out);
    fflush(le->out);
    tcsetattr(le->fd, TCSADRAIN, &saved);
    return status;
}

/* A whole line from a pipe or file; the last one may lack its newline. */
static enum lineedit_status read_plain(struct lineedit *le) {
    for (;;) {
        unsigned char c;
        int got = next_byte(le, &c);
        if (got < 0) return errno == EINTR ? LINEEDIT_INTERRUPT : LINEEDIT_ERROR;
        if (got == 0) return le->len ? LINEEDIT_LINE : LINEEDIT_EOF;
        if (c == '\n') break;
        if (reserve(le, 1)) return LINEEDIT_ERROR;
        le->buf[le->len++] = (char)c;
    }
    if (le->len && le->buf[le->len - 1] == '\r') le->len--;
    return LINEEDIT_LINE;
}

enum lineedit_status lineedit_read(struct lineedit *le, const char *prompt, char **line, size_t *len) {
    le->len = le->pos = 0;
    le->buf[0] = 0;
    enum lineedit_status status = le->tty ? read_raw(le, prompt) : read_plain(le);
    le->buf[le->len] = 0;
    *line = le->buf;
    *len = le->len;
    return status;
}

void lineedit_history_add(struct lineedit *le, const char *line) {
    if (!*line || (le->n_history && !strcmp(le->history[le->n_history - 1], line))) return;
    if (le->n_history == le->history_cap) {
        int cap = le->history_cap ? le->history_cap * 2 : 32;
        char **g = realloc(le->history, sizeof *g * (size_t)cap);
        if (!g) return;
        le->history = g;
        le->history_cap = cap;
    }
    char *copy = strdup(line);
    if (copy) le->history[le->n_history++] = copy;
}
