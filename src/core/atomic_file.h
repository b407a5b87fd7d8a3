/* Output files that are never seen half-written. Bytes go to a temporary in
 * the destination's directory (on Linux an unnamed O_TMPFILE inode, so a
 * SIGKILL leaves nothing behind); commit flushes, fsyncs and renames it over
 * the destination, so a reader that has the old file open or mapped keeps
 * the old inode. Any failure, or discard, removes the temporary and leaves
 * the old file as it was. A destination that exists and is not a regular
 * file (/dev/null, a pipe) is written directly. */
#ifndef MOEX_ATOMIC_FILE_H
#define MOEX_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct atomic_file;

/* Creates the temporary (checks the directory now, before any long work);
 * NULL with moex_error() naming the path and the reason. */
struct atomic_file *atomic_file_create(const char *path);
/* The temporary's descriptor, for write/pwrite/ftruncate. */
int atomic_file_fd(const struct atomic_file *f);
/* A buffered stream on it (made on first call; NULL with moex_error()). Use
 * either the stream or the descriptor's file position, not both. */
FILE *atomic_file_stream(struct atomic_file *f);
/* The destination, as given. */
const char *atomic_file_path(const struct atomic_file *f);
/* write() until done: -1 with "PATH: write failed: <errno text>". */
int atomic_file_write(struct atomic_file *f, const void *data, size_t n);
/* Flushes, fsyncs, closes (each result checked) and renames into place.
 * Frees f, also on failure, which removes the temporary. */
int atomic_file_commit(struct atomic_file *f);
/* Removes the temporary; frees f. NULL is fine. */
void atomic_file_discard(struct atomic_file *f);

/* Async-signal-safe: unlinks the named temporaries in flight (the fallback
 * where O_TMPFILE is not supported, and the instant between naming an
 * O_TMPFILE inode and renaming it). For a program's SIGINT/SIGTERM handler. */
void atomic_file_unlink_pending(void);
/* Tests: false makes atomic_file_create use named temporaries only. */
void atomic_file_allow_tmpfile(bool allow);

#endif
