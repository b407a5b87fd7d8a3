/* A timeline of what ran where, written as Chrome trace-event JSON (opens in
 * Perfetto and chrome://tracing). Lanes are CPU threads and device queues.
 * Recording is a few stores per event; nothing is written until the end. */
#ifndef MOEX_TRACE_H
#define MOEX_TRACE_H

#include <stdint.h>

struct atomic_file;
struct trace;

/* NULL when out of memory. Events past `capacity` are counted and dropped. */
struct trace *trace_new(int64_t capacity);
void trace_free(struct trace *t);
/* Names a lane (tid) once, e.g. "cpu 0" or "device". */
void trace_lane(struct trace *t, int lane, const char *name);
/* A complete event: [start_ns, end_ns) on a lane. name must outlive t
 * (a string literal or other static text). Thread-safe. */
void trace_event(struct trace *t, int lane, const char *name, int64_t start_ns, int64_t end_ns);
/* Writes the JSON file, whole or not at all; -1 with moex_error(). */
int trace_write(const struct trace *t, const char *path);
/* The same into an output opened earlier (src/core/atomic_file.h): writes,
 * then commits or discards it. */
int trace_write_file(const struct trace *t, struct atomic_file *out);
int64_t trace_dropped(const struct trace *t);

#endif
