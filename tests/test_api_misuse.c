/* The public API against misuse, on a tiny synthetic model: contexts asked
 * for absurd sizes (and a scratch allocation that fails), sampler ids and
 * parameters out of range, a device share of 1e300, the one rule of a failed
 * evaluation (none of its tokens kept, no logits), and two threads on one
 * context or on two contexts of one model (the second caller gets an error,
 * nothing hangs). */
#include "moex_tools.h"

#include "harness.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static char model_path[4096];

static struct moex_model_params params(void) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 2;
    mp.pin_threads = false;
    return mp;
}

static moex_model *load_with(double hot_fraction) {
    struct moex_model_params mp = params();
    mp.device.hot_fraction = hot_fraction;
    return moex_model_load(&mp);
}

static moex_context *context_of(moex_model *m, int n_ctx, int n_batch) {
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    return moex_context_new(m, &cp);
}

static bool says(const char *what) {
    bool ok = strstr(moex_last_error(), what) != NULL;
    if (!ok) fprintf(stderr, "expected \"%s\" in \"%s\"\n", what, moex_last_error());
    return ok;
}

/* n_ctx and n_batch: bounded with clear errors; a batch larger than the
 * context is the context's length. */
static void context_sizes(moex_model *m) {
    moex_context *c = context_of(m, 64, INT_MAX);
    CHECKF(c != NULL, "n_batch INT_MAX: %s", moex_last_error());
    int32_t ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    CHECK(c && moex_eval(c, ids, 8) == 0 && moex_n_past(c) == 8);
    moex_context_free(c);
    CHECK(context_of(m, INT_MAX, 0) == NULL && says("n_ctx 2147483647"));
    CHECK(context_of(m, -1, 0) == NULL && says("n_ctx -1"));
    CHECK(context_of(m, 0, -5) == NULL && says("n_batch -5"));
    CHECK(moex_context_new_seqs(m, NULL, INT_MAX) == NULL && says("sequences, not 2147483647"));
    CHECK(moex_context_new_seqs(m, NULL, 0) == NULL && says("sequences, not 0"));
}

/* A scratch allocation that fails (the address space capped in a child
 * process) returns NULL with the message, never reading the freed context. */
static void context_out_of_memory(void) {
#ifdef UNDER_ASAN
    printf("note: the address-space cap is not tried under AddressSanitizer (its shadow memory needs the space)\n");
#else
    moex_model *m = load_with(1);
    CHECK(m != NULL);
    if (!m) return;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        /* A context of 2^18 tokens: its KV cache (256 MiB) fits under the
         * cap, the scratch of a batch of that many rows (3 x 256 floats
         * each, 768 MiB) does not. */
        struct rlimit rl = { (rlim_t)3 << 30, (rlim_t)3 << 30 };
        FILE *st = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (st && fscanf(st, "%lu", &pages) == 1) rl.rlim_cur = rl.rlim_max = (rlim_t)pages * 4096 + ((rlim_t)512 << 20);
        if (st) fclose(st);
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        moex_context *c = context_of(m, 1 << 18, 1 << 18);
        if (c) _exit(4);
        const char *e = moex_last_error();
        printf("under the cap: %s\n", e);
        fflush(stdout);
        _exit(strstr(e, "out of memory for a context of 262144 tokens (scratch") ? 0 : 5);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d",
           WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    moex_model_free(m);
#endif
}

/* Ids outside the vocabulary are not recorded (then the penalty would
 * write outside the logits); parameters out of range are refused. */
static void sampler_ranges(moex_model *m) {
    int V = moex_model_n_vocab(m);
    struct moex_sampler_params sp;
    moex_sampler_params_default(&sp);
    sp.repeat_penalty = 1.5f;
    sp.temperature = 0;
    moex_sampler *s = moex_sampler_new(m, &sp);
    moex_context *c = context_of(m, 64, 0);
    CHECK(s && c);
    if (!s || !c) { moex_sampler_free(s); moex_context_free(c); return; }
    int32_t ids[4] = { 1, 2, 3, 4 };
    CHECK(moex_eval(c, ids, 4) == 0);
    const int32_t bad[] = { -1, V, INT32_MAX, INT32_MIN };
    for (int i = 0; i < 4; i++) {
        moex_sampler_accept(s, bad[i]);
        CHECK(says("out of range"));
    }
    moex_sampler_accept(s, 1);
    int32_t id = moex_sample(s, c);
    CHECK(id >= 0 && id < V);
    moex_sampler_free(s);
    moex_context_free(c);

    moex_sampler_params_default(&sp);
    sp.repeat_last_n = INT_MAX;
    CHECK(moex_sampler_new(m, &sp) == NULL && says("repeat_last_n"));
    sp.repeat_last_n = -1;
    CHECK(moex_sampler_new(m, &sp) == NULL && says("repeat_last_n"));
    moex_sampler_params_default(&sp);
    sp.repeat_penalty = 0;
    CHECK(moex_sampler_new(m, &sp) == NULL && says("repeat_penalty"));
    sp.repeat_penalty = 1;
    sp.temperature = NAN;
    CHECK(moex_sampler_new(m, &sp) == NULL && says("NaN"));
}

static void device_share(void) {
    CHECK(load_with(1e300) == NULL && says("hot_fraction"));
    CHECK(load_with(-0.5) == NULL && says("hot_fraction"));
    CHECK(load_with(NAN) == NULL && says("hot_fraction"));
}

/* A failed evaluation keeps none of its tokens and leaves no logits:
 * moex_eval, moex_eval_all_logits, moex_prefill and moex_eval_batch. */
static void failed_evaluations(moex_model *m) {
    moex_context *c = moex_context_new_seqs(m, &(struct moex_context_params){ .n_ctx = 16 }, 2);
    CHECK(c != NULL);
    if (!c) return;
    int V = moex_model_n_vocab(m);
    int32_t ids[20] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 };
    int32_t with_bad[3] = { 5, V, 6 }, seqs[3] = { 0, 0, 0 };
    float *all = malloc(sizeof *all * (size_t)V * 20);
    CHECK(moex_eval(c, ids, 4) == 0 && moex_logits(c) != NULL);

    CHECK(moex_eval(c, ids, -1) == -1 && says("negative"));
    CHECK(moex_n_past(c) == 4 && moex_logits(c) == NULL);
    CHECK(moex_eval(c, ids, 4) == 0 && moex_n_past(c) == 8);
    CHECK(moex_eval(c, with_bad, 3) == -1 && says("out of range"));
    CHECK(moex_n_past(c) == 8 && moex_logits(c) == NULL);
    CHECK(moex_eval(c, ids, 9) == -1 && says("do not fit"));
    CHECK(moex_n_past(c) == 8 && moex_logits(c) == NULL);
    CHECK(moex_eval_all_logits(c, with_bad, 3, all) == -1 && moex_n_past(c) == 8);
    CHECK(moex_eval_all_logits(c, ids, -2, all) == -1 && moex_n_past(c) == 8);
    /* The tokens held are still known: a prefill of them evaluates one. */
    CHECK(moex_shared_prefix(c, ids, 8) == 4);
    CHECK(moex_prefill(c, ids, 20) == -1 && says("does not fit") && moex_n_past(c) == 8);
    int32_t prompt[6] = { 1, 2, 3, 4, 0, V };
    CHECK(moex_prefill(c, prompt, 6) == -1 && says("out of range") && moex_n_past(c) == 8);
    CHECK(moex_prefill(c, ids, 0) == -1 && moex_n_past(c) == 8 && moex_logits(c) == NULL);
    CHECK(moex_prefill(c, ids, 8) == 0 && moex_n_past(c) == 8 && moex_logits(c) != NULL);

    CHECK(moex_eval_batch(c, with_bad, seqs, 3) == -1 && says("out of range"));
    CHECK(moex_seq_n_past(c, 0) == 8 && moex_seq_logits(c, 0) == NULL);
    CHECK(moex_eval_batch(c, ids, seqs, -1) == -1 && says("negative"));
    int32_t two[2] = { 1, 1 };
    CHECK(moex_eval_batch(c, ids, two, 2) == 0 && moex_seq_n_past(c, 1) == 2);
    CHECK(moex_eval_batch(c, with_bad, two, 2) == -1 && moex_seq_n_past(c, 1) == 2 && moex_seq_logits(c, 1) == NULL);
    CHECK(moex_eval(c, ids, 0) == 0 && moex_n_past(c) == 8); /* nothing to do */
    free(all);
    moex_context_free(c);
}

/* ---- Two threads on one context. */

struct meeting {
    moex_context *c;
    moex_sampler *s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage;                 /* 1: the first caller is inside; 2: the second has tried */
    int second_rc[6];
    bool second_said_in_use[6];
    int reentrant_rc;
};

static void wait_stage(struct meeting *t, int stage) {
    pthread_mutex_lock(&t->lock);
    while (t->stage < stage) pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static void set_stage(struct meeting *t, int stage) {
    pthread_mutex_lock(&t->lock);
    t->stage = stage;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

/* Runs inside moex_generate on the first thread: the context is in use. */
static int inside(void *user, int32_t id, const char *text, size_t len) {
    (void)id, (void)text, (void)len;
    struct meeting *t = user;
    if (t->stage > 0) return 1;
    int32_t tok = 1;
    t->reentrant_rc = moex_eval(t->c, &tok, 1); /* the same thread, from its callback */
    set_stage(t, 1);
    wait_stage(t, 2);
    return 1;
}

static void *second_caller(void *arg) {
    struct meeting *t = arg;
    wait_stage(t, 1);
    int32_t tok = 1, seq = 0;
    float *all = malloc(sizeof *all * (size_t)4096);
    int rc[6] = {
        moex_eval(t->c, &tok, 1),
        moex_prefill(t->c, &tok, 1),
        moex_eval_batch(t->c, &tok, &seq, 1),
        moex_sample(t->s, t->c),
        moex_generate(t->c, t->s, &tok, 1, &(struct moex_generate_params){ .max_tokens = 1 },
                      &(struct moex_generate_result){ 0 }),
        moex_eval_all_logits(t->c, &tok, 1, all),
    };
    for (int i = 0; i < 6; i++) {
        t->second_rc[i] = rc[i];
        /* each call set the message; the last one is checked below */
    }
    t->second_said_in_use[0] = strstr(moex_last_error(), "in use") != NULL;
    free(all);
    set_stage(t, 2);
    return NULL;
}

struct racer {
    moex_context *c;
    const int32_t *prompt;
    int ok, in_use, other;
};

/* 50 prefills that ran, retrying those refused as in use (bounded). */
static void *race(void *arg) {
    struct racer *r = arg;
    for (int tries = 0; r->ok < 50 && r->other == 0 && tries < 1000000; tries++) {
        int rc = moex_prefill(r->c, r->prompt, 6 + r->ok % 3);
        if (rc == 0) r->ok++;
        else if (strstr(moex_last_error(), "in use")) r->in_use++, sched_yield();
        else r->other++;
    }
    return NULL;
}

/* Two threads, one on a and one on b, each until 50 of its prefills ran. */
static void race_pair(const char *what, moex_context *a, moex_context *b) {
    static const int32_t p1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, p2[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };
    struct racer r1 = { a, p1, 0, 0, 0 }, r2 = { b, p2, 0, 0, 0 };
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, race, &r1) == 0);
    CHECK(pthread_create(&tb, NULL, race, &r2) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECKF(r1.ok == 50 && r2.ok == 50 && r1.other == 0 && r2.other == 0, "%s: %d and %d ran, %d and %d failed", what,
           r1.ok, r2.ok, r1.other, r2.other);
    printf("racing prefills on %s: %d and %d ran, %d and %d refused as in use\n", what, r1.ok, r2.ok, r1.in_use,
           r2.in_use);
}

static void two_threads(moex_model *m) {
    struct meeting t = { .c = context_of(m, 64, 0), .s = moex_sampler_new(m, NULL), .stage = 0 };
    CHECK(t.c && t.s);
    if (!t.c || !t.s) { moex_context_free(t.c); moex_sampler_free(t.s); return; }
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    pthread_t other;
    CHECK(pthread_create(&other, NULL, second_caller, &t) == 0);
    int32_t prompt[4] = { 1, 2, 3, 4 };
    struct moex_generate_params gp = { .max_tokens = 4, .on_token = inside, .user = &t };
    struct moex_generate_result gr;
    CHECK(moex_generate(t.c, t.s, prompt, 4, &gp, &gr) == 0 && gr.finish == MOEX_FINISH_CALLBACK);
    pthread_join(other, NULL);
    CHECK(t.reentrant_rc == -1);
    for (int i = 0; i < 6; i++) CHECKF(t.second_rc[i] == -1, "call %d of the second thread returned %d", i, t.second_rc[i]);
    CHECK(t.second_said_in_use[0]);
    /* The first caller's context is whole: it goes on. */
    CHECK(moex_n_past(t.c) == 4 && moex_eval(t.c, prompt, 1) == 0 && moex_n_past(t.c) == 5);

    /* Two threads racing on one context: each call runs alone or is
     * refused as in use; nothing hangs (the alarm in main would fire). */
    race_pair("one context", t.c, t.c);
    int32_t p1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    CHECK(moex_prefill(t.c, p1, 8) == 0 && moex_n_past(t.c) == 8);
    pthread_mutex_destroy(&t.lock);
    pthread_cond_destroy(&t.cond);
    moex_sampler_free(t.s);
    moex_context_free(t.c);
}

/* ---- Two threads on two contexts of one model: its worker threads serve
 * one call at a time; the other is refused, nothing hangs. */

struct progress_probe {
    moex_context *other;       /* a context of the same model */
    int calls, rc;
    char error[512];
};

/* Called by the executor while moex_context_new packs experts on the
 * model's threads: evaluating another context now must be refused. */
static void on_progress(void *user, const char *label, uint64_t done, uint64_t total) {
    (void)label, (void)done, (void)total;
    struct progress_probe *p = user;
    if (!p->other || p->calls++) return;
    int32_t tok = 1;
    p->rc = moex_eval(p->other, &tok, 1);
    snprintf(p->error, sizeof p->error, "%s", moex_last_error());
}

static void two_contexts(void) {
    struct progress_probe probe = { 0 };
    struct moex_model_params mp = params();
    mp.device.device = "cpu";
    mp.device.no_pack = true;
    mp.progress = on_progress;
    mp.user = &probe;
    moex_model *m = moex_model_load(&mp);
    CHECK(m != NULL);
    if (!m) return;
    moex_context *b = context_of(m, 64, 0);
    probe.other = b;
    moex_context *a = context_of(m, 64, 0);
    CHECK(a && b);
    CHECKF(probe.calls > 0 && probe.rc == -1 && strstr(probe.error, "the model's threads are in use"),
           "%d progress calls, eval %d: %s", probe.calls, probe.rc, probe.error);
    probe.other = NULL;
    if (a && b) race_pair("two contexts of one model", a, b);
    moex_context_free(a);
    moex_context_free(b);
    moex_model_free(m);
}

int main(void) {
    alarm(300); /* a hang fails the test instead of stalling the suite */
    if (test_synth_file("tiny", NULL, "misuse.gguf", model_path, sizeof model_path) != 0) return 1;
    device_share();
    context_out_of_memory();
    moex_model *m = load_with(1);
    CHECK(m != NULL);
    if (m) {
        context_sizes(m);
        sampler_ranges(m);
        failed_evaluations(m);
        two_threads(m);
        moex_model_free(m);
    }
    two_contexts();
    return test_finish();
}
