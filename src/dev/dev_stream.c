/* A device's stream: submissions and host functions run in order, on a
 * worker of the device's own when it has threads of its own, else on the
 * caller as they are queued. A fence is a command's number; a failure is
 * kept with its fence until a wait reports it, and the commands after it
 * are skipped until then (their inputs may be what failed). */
#include "dev/dev_impl.h"

#include "core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_DEPTH = 32 };

struct stream_cmd {
    struct dev_job *jobs; /* (cap) a copy of the submission's jobs */
    int n_jobs, cap;
    dev_host_fn fn;       /* or a host function */
    void *arg;
};

struct dev_stream {
    bool threaded;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    struct stream_cmd cmds[STREAM_DEPTH]; /* command f at cmds[(f - 1) % STREAM_DEPTH] */
    dev_fence queued, done;
    bool mem_open;         /* the worker holds the device memory open */
    int error;             /* the first failure not yet reported, and its fence */
    dev_fence error_fence;
    char message[512];
};

/* A host function's device calls nest inside one opening of the memory:
 * under the guard each opening costs page-table work. */
static int run_cmd(struct dev *d, struct stream_cmd *c) {
    if (!c->fn) return dev_execute(d, c->jobs, c->n_jobs);
    dev_mem_open(d);
    int rc = c->fn(d, c->arg);
    dev_mem_close(d);
    return rc;
}

/* Runs command f (on whichever thread runs the stream) and records it. */
static void finish(struct dev *d, dev_fence f, struct stream_cmd *c) {
    struct dev_stream *s = d->stream;
    int rc;
    pthread_mutex_lock(&s->lock);
    bool skip = s->error != DEV_OK;
    pthread_mutex_unlock(&s->lock);
    rc = skip ? DEV_E_SUBMIT : run_cmd(d, c);
    pthread_mutex_lock(&s->lock);
    if (rc != DEV_OK && !skip) {
        s->error = rc;
        s->error_fence = f;
        snprintf(s->message, sizeof s->message, "%s", moex_error());
    }
    s->done = f;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void *worker(void *arg) {
    struct dev *d = arg;
    struct dev_stream *s = d->stream;
    /* The memory stays open while commands follow each other. */
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->done == s->queued && s->mem_open) {
            pthread_mutex_unlock(&s->lock);
            dev_mem_close(d);
            pthread_mutex_lock(&s->lock);
            s->mem_open = false;
            pthread_cond_broadcast(&s->cond);
            continue;
        }
        while (s->done == s->queued && !s->stop) pthread_cond_wait(&s->cond, &s->lock);
        if (s->done == s->queued) break; /* stopping, and nothing left */
        dev_fence f = s->done + 1;
        bool opening = !s->mem_open;
        s->mem_open = true;
        pthread_mutex_unlock(&s->lock);
        if (opening) dev_mem_open(d);
        finish(d, f, &s->cmds[(f - 1) % STREAM_DEPTH]);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int dev_stream_start(struct dev *d) {
    struct dev_stream *s = calloc(1, sizeof *s);
    if (!s) return moex_errorf("%s: out of memory", d->caps.name), DEV_E_NOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    d->stream = s;
    bool own_threads = d->pool == NULL || d->own_pool;
    if (own_threads && pthread_create(&s->thread, NULL, worker, d) == 0) s->threaded = true;
    return DEV_OK;
}

void dev_stream_stop(struct dev *d) {
    struct dev_stream *s = d->stream;
    if (!s) return;
    if (s->threaded) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; i < STREAM_DEPTH; i++) free(s->cmds[i].jobs);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    d->stream = NULL;
}

/* A free command for the next fence, waiting for room; the lock is held on return. */
static struct stream_cmd *reserve(struct dev_stream *s) {
    pthread_mutex_lock(&s->lock);
    while (s->queued - s->done >= STREAM_DEPTH) pthread_cond_wait(&s->cond, &s->lock);
    return &s->cmds[s->queued % STREAM_DEPTH];
}

static void issue(struct dev *d, struct stream_cmd *c, dev_fence *fence) {
    struct dev_stream *s = d->stream;
    dev_fence f = ++s->queued;
    if (fence) *fence = f;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (!s->threaded) finish(d, f, c);
}

int dev_stream_submit(struct dev *d, const struct dev_job *jobs, int n_jobs, dev_fence *fence) {
    struct stream_cmd *c = reserve(d->stream);
    if (c->cap < n_jobs) {
        struct dev_job *j = realloc(c->jobs, sizeof *j * (size_t)n_jobs);
        if (!j) {
            pthread_mutex_unlock(&d->stream->lock);
            return moex_errorf("%s: out of memory", d->caps.name), DEV_E_NOMEM;
        }
        c->jobs = j;
        c->cap = n_jobs;
    }
    memcpy(c->jobs, jobs, sizeof *jobs * (size_t)n_jobs);
    c->n_jobs = n_jobs;
    c->fn = NULL;
    issue(d, c, fence);
    return DEV_OK;
}

int dev_stream_host(struct dev *d, dev_host_fn fn, void *arg, dev_fence *fence) {
    struct stream_cmd *c = reserve(d->stream);
    c->fn = fn;
    c->arg = arg;
    issue(d, c, fence);
    return DEV_OK;
}

int dev_stream_wait(struct dev *d, dev_fence fence) {
    struct dev_stream *s = d->stream;
    pthread_mutex_lock(&s->lock);
    if (fence > s->queued) {
        pthread_mutex_unlock(&s->lock);
        return moex_errorf("%s: wait on fence %llu, %llu issued", d->caps.name, (unsigned long long)fence,
                           (unsigned long long)s->queued),
               DEV_E_ARG;
    }
    while (s->done < fence) pthread_cond_wait(&s->cond, &s->lock);
    int rc = DEV_OK;
    if (s->error != DEV_OK && s->error_fence <= fence) {
        rc = s->error;
        moex_errorf("%s", s->message);
        s->error = DEV_OK;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void dev_stream_drain(struct dev *d) {
    struct dev_stream *s = d->stream;
    if (!s || !s->threaded || pthread_equal(pthread_self(), s->thread)) return;
    pthread_mutex_lock(&s->lock);
    while (s->done < s->queued || s->mem_open) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}
