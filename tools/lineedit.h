/* A small line editor for `moex chat`: on a terminal, raw mode while a line
 * is typed (arrows, Home/End, Ctrl-A/E, backspace, Delete, Ctrl-U/K, history
 * with Up/Down); elsewhere (a pipe, a file) plain reads of whole lines. */
#ifndef MOEX_LINEEDIT_H
#define MOEX_LINEEDIT_H

#include <stdbool.h>
#include <stdio.h>

enum lineedit_status {
    LINEEDIT_LINE,        /* a line was entered */
    LINEEDIT_EOF,         /* end of input (Ctrl-D on an empty line) */
    LINEEDIT_INTERRUPT,   /* Ctrl-C (on a terminal, or SIGINT while reading a pipe) */
    LINEEDIT_ERROR,       /* out of memory or a read error (errno says) */
};

struct lineedit;

/* Edits lines read from fd, echoing to out; NULL when out of memory. */
struct lineedit *lineedit_new(int fd, FILE *out);
void lineedit_free(struct lineedit *le);
/* Whether fd is a terminal (raw editing) rather than plain reads. */
bool lineedit_is_tty(const struct lineedit *le);
/* Shows prompt (on a terminal only) and reads one line into *line (the
 * editor's buffer, valid until the next call, no newline; it may hold NUL
 * bytes when read from a pipe: *len says how many bytes). With
 * LINEEDIT_INTERRUPT, *line holds what had been typed. */
enum lineedit_status lineedit_read(struct lineedit *le, const char *prompt, char **line, size_t *len);
/* Appends a line to the history (Up/Down); the same line twice in a row is kept once. */
void lineedit_history_add(struct lineedit *le, const char *line);

#endif
