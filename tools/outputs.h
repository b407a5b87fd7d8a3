/* Output files on the command line: a signal that ends the program removes
 * its temporaries, and an output that is one of the command's inputs is
 * refused before any work (the writers themselves are moex_file, moex.h). */
#ifndef MOEX_OUTPUTS_H
#define MOEX_OUTPUTS_H

struct session_opts;

/* SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE (where not ignored) unlink
 * the named temporaries in flight, then end the program as the signal
 * would; SIGXFSZ is ignored so that a file size limit is a write error. */
void outputs_install_signal_handlers(void);
/* The command's exit status; when standard output could not be written
 * (`moex run > file` on a full disk), says so, and 0 becomes 1. */
int outputs_flush_stdout(int status);
/* 0, or 2 after printing "OUT_OPT OUT and IN_OPT IN are the same file" when
 * out and in name one regular file (the same inode, or the same path before
 * either exists). NULL paths are fine. */
int outputs_check(const char *out_opt, const char *out, const char *in_opt, const char *in);
/* outputs_check of out against every file a session reads or writes: the
 * model (or the default one), --stats, the pack file and --trace. */
int outputs_check_session(const struct session_opts *o, const char *out_opt, const char *out);

#endif
