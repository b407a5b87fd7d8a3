#include "serve/serve_sched.h"

#include "serve/serve.h"
#include "serve/serve_struct.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    int seq;                           /* its sequence in the shared context */
    moex_sampler *sampler;
    moex_decoder *decoder;
    struct serve_job *job;             /* NULL: free */
    int n_prefilled;                   /* prompt tokens the sequence holds for the job */
    bool started;                      /* the job's prefill has begun (prefix kept, sampler fed) */
    int32_t next;                      /* the token sampled last, for the next batch; -1: none */
    int in_batch;                      /* tokens this step's batch holds for the slot */
    bool prompt_done;                  /* this step evaluated the last of its job's prompt (choice 0 of n > 1) */
};

/* Prompt tokens one step evaluates, over every slot in prefill, while some
 * slot decodes: a long prompt goes in pieces, each batched with the other
 * slots' decode tokens, so that their next token is never more than this
 * much prefill away. With no slot decoding, up to PREFILL_IDLE (requests
 * that came together all start sooner). */
#define PREFILL_CHUNK 128
#define PREFILL_IDLE 512

struct scheduler {
    moex_model *model;
    moex_context *ctx;                 /* one sequence per slot */
    struct slot *slots;
    int n_slots;
    int32_t *batch, *batch_seq;        /* (PREFILL_IDLE + n_slots) this step's tokens and their sequences */
    float *logprobs;                   /* (n_vocab) scratch of emit_token */
    int n_vocab;
    pthread_mutex_t mu;
    pthread_cond_t work;               /* a job was queued, or stop */
    struct serve_job **queue;          /* FIFO ring of waiting jobs */
    int q_head, q_len, q_cap;
    bool stop;
    pthread_t thread;
    bool started;
    struct sched_stats stats;          /* under mu */
};

struct serve_job *serve_job_new(void) {
    struct serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_cond_init(&j->changed, NULL);
    j->wake = &j->changed;
    j->fd = -1;
    j->refs = 1;
    j->finish = "length";
    return j;
}

void serve_job_unref(struct serve_job *j) {
    if (!j || --j->refs > 0) return;
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    free(j->bias_id);
    free(j->bias);
    free(j->tokens);
    serve_struct_free(j->structured);
    pthread_cond_destroy(&j->changed);
    free(j);
}

pthread_mutex_t *sched_mutex(struct scheduler *s) { return &s->mu; }

/* A client whose connection is broken (reset, or closed both ways) is gone.
 * A half-close (shutdown of its sending side) only ends its upload: it
 * still reads the answer. A client that closed its socket looks the same
 * until the next write fails (a stream's next event). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = { .fd = fd, .events = 0 };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* Under mu: the text that can no longer become a stop string is released;
 * a stop string found ends the text there. Returns true when one was found. */
static bool release_text(struct serve_job *j) {
    /* The earliest match of any stop string, whatever their order. */
    size_t cut = SIZE_MAX;
    for (int i = 0; i < j->n_stop; i++) {
        size_t n = strlen(j->stop[i]);
        size_t from = j->released >= n ? j->released - n + 1 : 0;
        for (size_t p = from; p + n <= j->len && p < cut; p++)
            if (!memcmp(j->text + p, j->stop[i], n)) { cut = p; break; }
    }
    if (cut != SIZE_MAX) {
        j->len = cut;
        j->released = cut;
        return true;
    }
    size_t hold = 0; /* the longest end of the text that starts a stop string */
    for (int i = 0; i < j->n_stop; i++) {
        size_t n = strlen(j->stop[i]);
        for (size_t k = n - 1; k > hold; k--)
            if (k <= j->len && !memcmp(j->text + j->len - k, j->stop[i], k)) { hold = k; break; }
    }
    if (j->len - hold > j->released) j->released = j->len - hold;
    return false;
}

static int append_text(struct serve_job *j, const char *text, size_t len) {
    if (j->len + len + 1 > j->cap) {
        size_t cap = (j->len + len + 1) * 2;
        char *g = realloc(j->text, cap);
        if (!g) return -1;
        j->text = g;
        j->cap = cap;
    }
    memcpy(j->text + j->len, text, len);
    j->len += len;
    j->text[j->len] = 0;
    return 0;
}

/* Under mu: ends the slot's job and frees the slot. */
static void finish_job(struct scheduler *s, struct slot *sl, const char *finish, const char *error) {
    struct serve_job *j = sl->job;
    if (!j) return;
    if (finish) j->finish = finish;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    if (j->cancelled) s->stats.cancelled++;
    j->released = j->len;
    j->done = true;
    s->stats.requests_done++;
    pthread_cond_broadcast(j->wake);
    serve_job_unref(j);
    sl->job = NULL;
    moex_sampler_free(sl->sampler);
    moex_decoder_free(sl->decoder);
    sl->sampler = NULL;
    sl->decoder = NULL;
    sl->next = -1;
    sl->started = false;
}

/* Under mu: the free slot whose context shares the longest prefix with the job's prompt. */
static struct slot *pick_slot(struct scheduler *s, const struct serve_job *j) {
    struct slot *best = NULL;
    int best_keep = -1;
    for (int i = 0; i < s->n_slots; i++) {
        if (s->slots[i].job) continue;
        int keep = moex_seq_shared_prefix(s->ctx, s->slots[i].seq, j->prompt, j->n_prompt);
        if (keep > best_keep) { best = &s->slots[i]; best_keep = keep; }
    }
    return best;
}

/* Under mu: drops the queued jobs whose client went away while waiting. */
static void sweep_queue(struct scheduler *s) {
    int kept = 0;
    for (int i = 0; i < s->q_len; i++) {
        struct serve_job *j = s->queue[(s->q_head + i) % s->q_cap];
        if (j->cancelled || client_gone(j->fd)) {
            j->cancelled = true;
            j->done = true;
            s->stats.cancelled++;
            pthread_cond_broadcast(j->wake);
            serve_job_unref(j);
        } else {
            s->queue[(s->q_head + kept++) % s->q_cap] = j;
        }
    }
    s->q_len = kept;
}

/* Under mu: queued jobs into free slots. */
static void assign(struct scheduler *s) {
    sweep_queue(s);
    while (s->q_len > 0) {
        struct serve_job *j = s->queue[s->q_head];
        struct slot *sl = pick_slot(s, j);
        if (!sl) return;
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        sl->job = j;
        sl->n_prefilled = 0;
        sl->started = false;
        sl->next = -1;
        /* The job's sampler, from what api_parse read (serve_api.c api_sampler_fields). */
        sl->sampler = moex_sampler_new(s->model, &j->sampler);
        sl->decoder = moex_decoder_new(s->model);
        if (!sl->sampler || !sl->decoder) finish_job(s, sl, NULL, "out of memory");
        else if (serve_struct_sampler(j->structured, sl->sampler)) finish_job(s, sl, NULL, moex_last_error());
        else if (moex_sampler_set_penalties(sl->sampler, j->presence_penalty, j->frequency_penalty) ||
                 moex_sampler_set_logit_bias(sl->sampler, j->bias_id, j->bias, j->n_bias))
            finish_job(s, sl, NULL, moex_last_error());
    }
}

/* Under mu: ends the jobs whose client went away or whose time is up. */
static void drop_gone(struct scheduler *s) {
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        struct serve_job *j = sl->job;
        if (!j) continue;
        bool gone = j->cancelled || client_gone(j->fd);
        if (gone) j->cancelled = true;
        bool late = j->deadline_ns && serve_time_ns() > j->deadline_ns;
        if (gone || late) finish_job(s, sl, "length", NULL);
    }
}

/* Outside mu: the job's first prefill piece keeps what the sequence shares
 * with the prompt (at least one token is evaluated, for logits) and feeds
 * the prompt to the sampler. */
static void begin_prefill(struct scheduler *s, struct slot *sl) {
    struct serve_job *j = sl->job;
    int keep = moex_seq_shared_prefix(s->ctx, sl->seq, j->prompt, j->n_prompt);
    if (keep >= j->n_prompt) keep = j->n_prompt - 1;
    moex_seq_truncate(s->ctx, sl->seq, keep);
    moex_seq_checkpoint(s->ctx, sl->seq); /* recurrent state comes back to here cheaply */
    for (int i = 0; i < j->n_prompt; i++) moex_sampler_accept(sl->sampler, j->prompt[i]);
    sl->n_prefilled = moex_seq_n_past(s->ctx, sl->seq);
    sl->started = true;
    pthread_mutex_lock(&s->mu);
    j->n_reused = sl->n_prefilled;
    s->stats.reused_tokens += (uint64_t)sl->n_prefilled;
    pthread_mutex_unlock(&s->mu);
}

/* The slot of the job that evaluates the prompt for j's request (n > 1:
 * choice 0), while it holds it; NULL for a job alone or when that one is
 * gone. */
static struct slot *leader_slot(struct scheduler *s, const struct serve_job *j) {
    if (!j->group) return NULL;
    for (int i = 0; i < s->n_slots; i++) {
        const struct serve_job *o = s->slots[i].job;
        if (o && o->group == j->group && o->choice == 0) return &s->slots[i];
    }
    return NULL;
}

/* Outside mu: the leader's prompt has just been evaluated (its logits are
 * its last token's); the other choices waiting in their slots take a copy
 * of its sequence instead of evaluating the prompt again, and sample their
 * first token from the same logits this step. */
static void share_prompt(struct scheduler *s, struct slot *leader) {
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        struct serve_job *j = sl->job;
        if (!j || sl == leader || sl->started || j->group != leader->job->group) continue;
        if (moex_seq_copy(s->ctx, leader->seq, sl->seq) != 0) continue; /* it evaluates the prompt itself */
        for (int k = 0; k < j->n_prompt; k++) moex_sampler_accept(sl->sampler, j->prompt[k]);
        sl->started = true;
        sl->n_prefilled = j->n_prompt;
        sl->in_batch = 1; /* its first token comes with the leader's */
        pthread_mutex_lock(&s->mu);
        s->stats.prompt_tokens += (uint64_t)j->n_prompt;
        s->stats.reused_tokens += (uint64_t)j->n_prompt;
        pthread_mutex_unlock(&s->mu);
    }
}

/* Outside mu: this step's batch, every active slot's decode token and the
 * next prompt pieces while the prefill budget allows. Returns its tokens
 * and, in *prefill, how many of them are prompt tokens. */
static int build_batch(struct scheduler *s, int *prefill) {
    int n = 0, budget = PREFILL_IDLE;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].next >= 0) budget = PREFILL_CHUNK;
    *prefill = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        sl->in_batch = 0;
        if (!sl->job) continue;
        if (sl->next >= 0) {
            s->batch[n] = sl->next;
            s->batch_seq[n++] = sl->seq;
            sl->in_batch = 1;
            continue;
        }
        if (budget == 0 || sl->n_prefilled >= sl->job->n_prompt) continue;
        /* a further choice of a request waits for the prompt its first evaluates */
        struct slot *leader = sl->started ? NULL : leader_slot(s, sl->job);
        if (leader && leader != sl && leader->n_prefilled < leader->job->n_prompt) continue;
        if (!sl->started) begin_prefill(s, sl);
        int take = sl->job->n_prompt - sl->n_prefilled < budget ? sl->job->n_prompt - sl->n_prefilled : budget;
        for (int k = 0; k < take; k++) {
            s->batch[n] = sl->job->prompt[sl->n_prefilled + k];
            s->batch_seq[n++] = sl->seq;
        }
        sl->in_batch = take;
        budget -= take;
        *prefill += take;
    }
    return n;
}

/* Outside mu except where it says: the slot's next token from its logits,
 * its text released to the client, and the end of the job when it ends. */
/* Outside mu: the log-softmax of the slot's logits into s->logprobs. */
static void log_softmax(struct scheduler *s, const float *logits) {
    float max = logits[0];
    for (int i = 1; i < s->n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < s->n_vocab; i++) sum += exp((double)(logits[i] - max));
    float lse = max + (float)log(sum);
    for (int i = 0; i < s->n_vocab; i++) s->logprobs[i] = logits[i] - lse;
}

/* Under mu: the token's log-probability and its best alternatives. */
static int record_logprob(struct serve_job *j, const float *lp, int n_vocab, int32_t id) {
    if (j->n_tokens == j->cap_tokens) {
        int cap = j->cap_tokens ? 2 * j->cap_tokens : 64;
        struct serve_token *g = realloc(j->tokens, sizeof *g * (size_t)cap);
        if (!g) return -1;
        j->tokens = g;
        j->cap_tokens = cap;
    }
    struct serve_token *t = &j->tokens[j->n_tokens++];
    t->id = id;
    t->logprob = lp[id];
    t->text_end = j->len;
    t->n_top = 0;
    for (int v = 0; v < n_vocab; v++) { /* insertion into the short sorted list */
        if (t->n_top == j->top_logprobs && (t->n_top == 0 || lp[v] <= t->top_logprob[t->n_top - 1])) continue;
        int k = t->n_top < j->top_logprobs ? t->n_top++ : t->n_top - 1;
        while (k > 0 && t->top_logprob[k - 1] < lp[v]) {
            t->top_id[k] = t->top_id[k - 1];
            t->top_logprob[k] = t->top_logprob[k - 1];
            k--;
        }
        t->top_id[k] = v;
        t->top_logprob[k] = lp[v];
    }
    return 0;
}

static void emit_token(struct scheduler *s, struct slot *sl) {
    struct serve_job *j = sl->job;
    if (j->logprobs) log_softmax(s, moex_seq_logits(s->ctx, sl->seq)); /* before the sampler's penalties */
    int32_t id = moex_sample_seq(sl->sampler, s->ctx, sl->seq);
    bool eog = id >= 0 && moex_token_is_eog(s->model, id);
    size_t len = 0;
    const char *text = id >= 0 && !eog ? moex_decoder_put(sl->decoder, id, &len) : "";
    bool ended = eog || id < 0 || !text || j->n_generated + 1 >= j->max_tokens ||
                 moex_seq_n_past(s->ctx, sl->seq) >= moex_n_ctx(s->ctx);
    pthread_mutex_lock(&s->mu);
    if (id < 0 || !text) {
        finish_job(s, sl, NULL, moex_last_error());
        pthread_mutex_unlock(&s->mu);
        return;
    }
    int arc = 0;
    if (!eog) {
        j->n_generated++;
        s->stats.generated_tokens++;
        arc = append_text(j, text, len);
        if (arc == 0 && j->logprobs) arc = record_logprob(j, s->logprobs, s->n_vocab, id);
    }
    if (ended && arc == 0) { /* an unfinished UTF-8 sequence comes out as U+FFFD */
        text = moex_decoder_flush(sl->decoder, &len);
        arc = append_text(j, text, len);
    }
    bool stopped = arc == 0 && release_text(j);
    pthread_cond_broadcast(j->wake);
    if (arc != 0) finish_job(s, sl, NULL, "out of memory");
    else if (stopped || eog) finish_job(s, sl, "stop", NULL);
    else if (ended) finish_job(s, sl, "length", NULL);
    else sl->next = id;
    pthread_mutex_unlock(&s->mu);
}

/* Under mu: a forward pass of `rows` tokens in the batch-size histogram. */
static void count_batch(struct sched_stats *st, int rows, int prefill) {
    int b = 0;
    while (b < SCHED_BATCH_BUCKETS - 1 && rows > (1 << b)) b++;
    st->batch_hist[b]++;
    st->batches++;
    st->batch_rows += (uint64_t)rows;
    st->decode_rows += (uint64_t)(rows - prefill);
}

/* CPU time of the calling thread (s). */
static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Outside mu: one batch of every active slot, evaluated as one call. */
static void step(struct scheduler *s) {
    int prefill, n = build_batch(s, &prefill);
    if (n == 0) return;
    double t0 = serve_time_ns() * 1e-9, c0 = thread_cpu_s();
    int rc = moex_eval_batch(s->ctx, s->batch, s->batch_seq, n);
    double dt = serve_time_ns() * 1e-9 - t0, dc = thread_cpu_s() - c0;
    pthread_mutex_lock(&s->mu);
    /* The pass's time, shared by prompt and decode rows by count. */
    s->stats.prompt_s += dt * prefill / n;
    s->stats.generate_s += dt * (n - prefill) / n;
    s->stats.generate_cpu_s += dc * (n - prefill) / n;
    count_batch(&s->stats, n, prefill);
    bool shares = false;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        sl->prompt_done = false;
        if (!sl->job || !sl->in_batch) continue;
        if (rc != 0) { finish_job(s, sl, NULL, moex_last_error()); continue; }
        sl->next = -1;
        if (sl->n_prefilled < sl->job->n_prompt) {
            sl->n_prefilled += sl->in_batch;
            if (sl->n_prefilled < sl->job->n_prompt) sl->in_batch = 0; /* more pieces to come: no token yet */
            else {
                s->stats.prompt_tokens += (uint64_t)sl->job->n_prompt;
                sl->prompt_done = sl->job->group && sl->job->choice == 0;
                shares |= sl->prompt_done;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; shares && i < s->n_slots; i++)
        if (s->slots[i].prompt_done) share_prompt(s, &s->slots[i]);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].in_batch) emit_token(s, &s->slots[i]);
}

static void snapshot_counters(struct scheduler *s) {
    struct moex_counters k;
    moex_context_counters(s->ctx, &k);
    pthread_mutex_lock(&s->mu);
    s->stats.experts = k;
    pthread_mutex_unlock(&s->mu);
}

static void *run(void *arg) {
    struct scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        assign(s);
        drop_gone(s);
        int busy = 0;
        for (int i = 0; i < s->n_slots; i++) busy += s->slots[i].job != NULL;
        if (!busy) {
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        step(s);
        snapshot_counters(s);
        pthread_mutex_lock(&s->mu);
    }
    for (int i = 0; i < s->n_slots; i++) finish_job(s, &s->slots[i], NULL, "the server is stopping");
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

struct scheduler *sched_new(moex_model *m, int n_slots, const struct moex_context_params *cp, char *why, size_t size) {
    struct scheduler *s = calloc(1, sizeof *s);
    snprintf(why, size, "out of memory");
    if (!s) return NULL;
    s->model = m;
    s->n_slots = n_slots;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    s->q_cap = 64;
    s->slots = calloc((size_t)n_slots, sizeof *s->slots);
    s->queue = malloc(sizeof *s->queue * (size_t)s->q_cap);
    s->batch = malloc(sizeof *s->batch * (size_t)(PREFILL_IDLE + n_slots));
    s->batch_seq = malloc(sizeof *s->batch_seq * (size_t)(PREFILL_IDLE + n_slots));
    s->n_vocab = moex_model_n_vocab(m);
    s->logprobs = malloc(sizeof *s->logprobs * (size_t)s->n_vocab);
    if (!s->slots || !s->queue || !s->batch || !s->batch_seq || !s->logprobs) goto fail;
    for (int i = 0; i < n_slots; i++) {
        s->slots[i].seq = i;
        s->slots[i].next = -1;
    }
    if (!(s->ctx = moex_context_new_seqs(m, cp, n_slots))) {
        snprintf(why, size, "%s", moex_last_error());
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        snprintf(why, size, "cannot start the scheduler's thread");
        goto fail;
    }
    why[0] = 0;
    s->started = true;
    return s;
fail:
    sched_free(s);
    return NULL;
}

void sched_stop(struct scheduler *s) {
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        s->started = false;
    }
    pthread_mutex_lock(&s->mu);
    for (; s->q_len > 0; s->q_len--, s->q_head = (s->q_head + 1) % s->q_cap) {
        struct serve_job *j = s->queue[s->q_head];
        snprintf(j->error, sizeof j->error, "the server is stopping");
        j->done = true;
        pthread_cond_broadcast(j->wake);
        serve_job_unref(j);
    }
    pthread_mutex_unlock(&s->mu);
}

int sched_n_ctx(const struct scheduler *s) { return moex_n_ctx(s->ctx); }

void sched_free(struct scheduler *s) {
    if (!s) return;
    sched_stop(s);
    moex_context_free(s->ctx);
    free(s->slots);
    free(s->batch);
    free(s->batch_seq);
    free(s->logprobs);
    free(s->queue);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Under mu: j queued, or done with the reason it cannot be. */
static void enqueue(struct scheduler *s, struct serve_job *j) {
    if (s->stop) {
        snprintf(j->error, sizeof j->error, "the server is stopping");
        j->done = true;
        pthread_cond_broadcast(j->wake);
        return;
    }
    if (s->q_len == s->q_cap) {
        int cap = s->q_cap * 2;
        struct serve_job **g = malloc(sizeof *g * (size_t)cap);
        if (!g) {
            snprintf(j->error, sizeof j->error, "out of memory");
            j->done = true;
            pthread_cond_broadcast(j->wake);
            return;
        }
        for (int i = 0; i < s->q_len; i++) g[i] = s->queue[(s->q_head + i) % s->q_cap];
        free(s->queue);
        s->queue = g;
        s->q_head = 0;
        s->q_cap = cap;
    }
    j->refs++;
    s->queue[(s->q_head + s->q_len++) % s->q_cap] = j;
}

void sched_submit(struct scheduler *s, struct serve_job *const *jobs, int n) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < n; i++) enqueue(s, jobs[i]);
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

void sched_stats(struct scheduler *s, struct sched_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->slots = s->n_slots;
    out->queued = s->q_len;
    out->busy = 0;
    for (int i = 0; i < s->n_slots; i++) out->busy += s->slots[i].job != NULL;
    pthread_mutex_unlock(&s->mu);
}

void sched_slots(struct scheduler *s, struct sched_slot *out) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        const struct slot *sl = &s->slots[i];
        out[i] = (struct sched_slot){ .busy = sl->job != NULL };
        if (sl->job) {
            out[i].n_prompt = sl->job->n_prompt;
            out[i].n_generated = sl->job->n_generated;
            out[i].max_tokens = sl->job->max_tokens;
            out[i].sampler = sl->job->sampler;
        }
    }
    pthread_mutex_unlock(&s->mu);
}
