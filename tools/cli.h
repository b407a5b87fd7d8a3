/* Shared pieces of the command line: one cmd_*.c file per command. */
#ifndef MOEX_CLI_H
#define MOEX_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each command: returns the process exit status. argv[0] is the command name. */
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

/* Strict parsers: the whole string must be a value in range; on failure they
 * print "moex: <what>: invalid value '<s>'" to stderr and return -1. */
int cli_parse_int(const char *what, const char *s, int64_t min, int64_t max, int64_t *out);
int cli_parse_float(const char *what, const char *s, double min, double max, double *out);
/* "6G", "512M", "1024", "1.5G"; percentages are rejected here. */
int cli_parse_size(const char *what, const char *s, uint64_t *out);
/* Comma-separated integers into a malloc'd array; returns count, or -1 after
 * printing the error (an empty item is an error). */
int cli_parse_int_list(const char *what, const char *s, int64_t min, int64_t max, int64_t **out);
/* The whole of a file, or of standard input for "-", NUL-terminated (the
 * length counts only the file's bytes, which may hold NULs). -1 after
 * printing "moex: WHAT PATH: cannot read: reason". */
int cli_read_input(const char *what, const char *path, char **data, size_t *len);
/* The environment variables that every command reads (MOEX_CACHE,
 * MOEX_INTERLEAVE, MOEX_ISA) and applies the ISA (moex_set_isa): isa_flag
 * (--isa) when not NULL, MOEX_ISA then unread. -1 after printing an error
 * for a bad value. */
int cli_check_env(const char *isa_flag);
/* MOEX_INTERLEAVE=0 sets *no_interleave, =1 clears it, unset leaves it; -1
 * after printing an error for another value. */
int cli_env_no_interleave(bool *no_interleave);
/* moex_set_isa(isa): -1 after printing "WHAT: invalid value 'ISA'". */
int cli_set_isa(const char *what, const char *isa);
/* Sim device figures (src/dev/sim.h): checked when given, so that a bad one
 * is a bad value whatever the device. -1 after printing "WHAT: invalid value
 * 'VALUE': reason". */
int cli_check_sim(const char *what, const char *value, const char *spec);
/* Prints "moex: message" to stderr and returns 1 (for `return cli_fail(...)`). */
int cli_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Prints "moex: COMMAND: message (moex COMMAND --help lists the options)"
 * and returns 2, for a command line that is wrong as a whole. */
int cli_usage(const char *command, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Monotonic time in nanoseconds. */
int64_t cli_time_ns(void);
/* True when argv[i] is "-h" or "--help". */
bool cli_is_help(const char *arg);
/* Takes the value of an option that needs one: prints an error and returns
 * NULL when missing or empty. Advances *i. */
const char *cli_value(int argc, char **argv, int *i);

#endif
