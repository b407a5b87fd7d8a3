/* Options shared by every command that runs a model, and the loaded model,
 * thread pool and context they describe. */
#ifndef MOEX_SESSION_H
#define MOEX_SESSION_H

#include "moex_tools.h"

#include <stdbool.h>
#include <stdio.h>

/* Which options the command line set (session_opts.given): their MOEX_*
 * variables then stay unread, so that --device overrides a bad MOEX_DEVICE. */
enum {
    SESSION_GIVEN_DEVICE = 1 << 0,
    SESSION_GIVEN_BUDGET = 1 << 1,
    SESSION_GIVEN_MIN_M = 1 << 2,
    SESSION_GIVEN_STATS = 1 << 3,
    SESSION_GIVEN_OVERLAP = 1 << 4,
    SESSION_GIVEN_SIM = 1 << 5,
    SESSION_GIVEN_PACK = 1 << 6,
    SESSION_GIVEN_NO_PACK = 1 << 7,
    SESSION_GIVEN_CTX = 1 << 8,
    SESSION_GIVEN_ADAPTIVE = 1 << 9,
    SESSION_GIVEN_INTERLEAVE = 1 << 10,
    SESSION_GIVEN_BACKBONE = 1 << 11,
    SESSION_GIVEN_RKNPU = 1 << 12,
};

/* The shared options a command takes besides the model, threads, kernels
 * and device ones (-m, -t, --no-pin, --isa, --no-interleave, --device,
 * --hot-budget, --stats, --no-backbone, --sim): its help lists only those,
 * and its parser knows only those. */
enum {
    SESSION_CONTEXT = 1 << 0,        /* -c, -b, --kv-type */
    SESSION_RUNTIME = 1 << 1,        /* --min-m, --no-overlap, --adaptive-placement, --pack, --no-pack */
    SESSION_REPORTS = 1 << 2,        /* --profile, --trace */
    SESSION_ALL = SESSION_CONTEXT | SESSION_RUNTIME | SESSION_REPORTS,
};

/* How a command's help describes the shared options. */
struct session_help {
    unsigned groups;                 /* SESSION_* */
    const char *ctx_default;         /* -c's default in words; NULL: the library's (min(4096, trained)) */
    const char *batch_default;       /* -b's; NULL: the library's (512) */
    bool device_required;
    bool own_threads;                /* the command lists -t itself (moex bench: a list) */
};

struct session_opts {
    unsigned groups;                 /* SESSION_*: the ones session_opts_parse takes (defaults: all) */
    const char *model_path;  /* NULL: the built-in default model */
    int threads;             /* 0: physical cores */
    int n_ctx, n_batch;
    bool kv_f32;                     /* --kv-type f32 */
    bool pin;
    bool no_warmup;                  /* --no-warmup: bench skips its warm-up run; nothing else has one */
    const char *isa;                 /* --isa: the most the CPU kernels may use (moex_set_isa) */
    bool no_interleave;              /* --no-interleave [MOEX_INTERLEAVE=0] */
    struct moex_device_params experts; /* --device, --hot-budget, --min-m, --stats, --no-overlap, --sim,
                                          --pack, --no-pack, --adaptive-placement */
    bool profile;                    /* --profile: counters per phase on stderr at the end */
    const char *trace_path;          /* --trace FILE */
    unsigned given;                  /* SESSION_GIVEN_* */
    bool finished;                   /* session_opts_finish ran */
};

struct session {
    moex_model *mm;                  /* the public handles */
    moex_context *mc;
    moex_file *trace_file;           /* --trace, opened before the run */
    bool profile;
    const char *trace_path;
};

/* The defaults (always 0). */
int session_opts_defaults(struct session_opts *o);
/* If argv[*i] is a shared option, consumes it (and its value) and returns 1;
 * 0 if it is not one; -1 after printing an error. */
int session_opts_parse(struct session_opts *o, int argc, char **argv, int *i);
/* After the command line: the MOEX_* environment variables of the options it
 * did not set (MOEX_DEVICE, MOEX_HOT_BUDGET, MOEX_MIN_M, MOEX_STATS,
 * MOEX_OVERLAP, MOEX_SIM, MOEX_PACK, MOEX_INTERLEAVE) and MOEX_ISA, parsed
 * strictly; applies --isa (over MOEX_ISA); and the options that exclude each other: -1 after printing an error (exit 2). */
int session_opts_finish(struct session_opts *o);
/* The help lines of the shared options: all of them with the library's
 * defaults; those h says. */
void session_opts_help(FILE *out);
void session_opts_help_with(FILE *out, const struct session_help *h);
/* The library's parameters for these options (strings point into o). */
void session_model_params(const struct session_opts *o, struct moex_model_params *mp);
void session_context_params(const struct session_opts *o, struct moex_context_params *cp);
/* Prints the library's notes ("moex: note: ...") and progress (a bar on stderr). */
void session_log(void *user, enum moex_log_level level, const char *message);
void session_progress(void *user, const char *label, uint64_t done, uint64_t total);
/* The model's path: -m, or the built-in default model, made on first use;
 * NULL after printing the error. */
const char *session_model_path(const struct session_opts *o);
/* Opens the --trace output (refusing one that is an input), loads the model
 * (making the default one first if needed), starts the threads and makes a
 * context; says at once why a device is not used. 0, or the exit status
 * after printing the error: 2 for a refused output or a bad setting, 1 for
 * other failures. */
int session_open(struct session *s, const struct session_opts *o);
/* Prints the --profile counters, writes the --trace file and reports a
 * device failure that happened while running; then frees everything. 0, or
 * 1 after printing why the trace could not be written. */
int session_close(struct session *s);
/* Path of the built-in default model (made on first use). */
const char *default_model_path(void);
/* Makes the default model at path (default_model.c); 0, or 1 after printing the error. */
int make_default_model(const char *path);

#endif
