#include "core/trace.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LANES = 64 };

struct trace_rec {
    const char *name;
    int64_t start_ns, end_ns;
    int lane;
};

struct trace {
    struct trace_rec *recs;
    int64_t capacity;
    _Atomic int64_t used;
    char lane_names[MAX_LANES][32];
};

struct trace *trace_new(int64_t capacity) {
    struct trace *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->recs = malloc(sizeof *t->recs * (size_t)(capacity > 0 ? capacity : 1));
    if (!t->recs) { free(t); return NULL; }
    t->capacity = capacity;
    return t;
}

void trace_free(struct trace *t) {
    if (!t) return;
    free(t->recs);
    free(t);
}

void trace_lane(struct trace *t, int lane, const char *name) {
    if (!t || lane < 0 || lane >= MAX_LANES) return;
    snprintf(t->lane_names[lane], sizeof t->lane_names[lane], "%s", name);
}

void trace_event(struct trace *t, int lane, const char *name, int64_t start_ns, int64_t end_ns) {
    if (!t) return;
    int64_t i = atomic_fetch_add_explicit(&t->used, 1, memory_order_relaxed);
    if (i >= t->capacity) return;
    t->recs[i] = (struct trace_rec){ name, start_ns, end_ns, lane };
}

int64_t trace_dropped(const struct trace *t) {
    int64_t used = atomic_load(&((struct trace *)t)->used);
    return used > t->capacity ? used - t->capacity : 0;
}

/* Event names come from moex itself, but escape anyway: the file must parse. */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int trace_write_file(const struct trace *t, struct atomic_file *out) {
    FILE *f = atomic_file_stream(out);
    if (!f) {
        atomic_file_discard(out);
        return -1;
    }
    int64_t n = atomic_load(&((struct trace *)t)->used);
    if (n > t->capacity) n = t->capacity;
    int64_t origin = INT64_MAX;
    for (int64_t i = 0; i < n; i++) if (t->recs[i].start_ns < origin) origin = t->recs[i].start_ns;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    int first = 1;
    for (int lane = 0; lane < MAX_LANES; lane++) {
        if (!t->lane_names[lane][0]) continue;
        fprintf(f, "%s{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", first ? "" : ",\n",
                lane);
        put_json_string(f, t->lane_names[lane]);
        fputs("}}", f);
        first = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        const struct trace_rec *r = &t->recs[i];
        fprintf(f, "%s{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":", first ? "" : ",\n",
                r->lane, (double)(r->start_ns - origin) / 1e3, (double)(r->end_ns - r->start_ns) / 1e3);
        put_json_string(f, r->name);
        fputc('}', f);
        first = 0;
    }
    if (fputs("\n]}\n", f) < 0 || ferror(f)) {
        moex_errorf("%s: write failed: %s", atomic_file_path(out), strerror(errno));
        atomic_file_discard(out);
        return -1;
    }
    return atomic_file_commit(out);
}

int trace_write(const struct trace *t, const char *path) {
    struct atomic_file *out = atomic_file_create(path);
    return out ? trace_write_file(t, out) : -1;
}
