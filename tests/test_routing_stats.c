/* Routing statistics: every counter moves as the definitions say, the file
 * round-trips, and broken files are refused with a message. */
#include "harness.h"

#include "core/error.h"
#include "moe/routing_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *path_of(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", test_tmpdir(), name);
    return buf;
}

/* A hand-made sequence of 4 experts, top-2, one layer:
 *   t0 {0,1}  t1 {1,2}  t2 {0,1}  ... and a second layer that never repeats. */
static void test_counts(void) {
    struct routing_stats *s = routing_stats_new(2, 4, 2, "hand");
    CHECK(s != NULL);
    if (!s) return;
    routing_stats_begin_sequence(s);
    int32_t ids0[] = { 0, 1, 1, 2, 0, 1 };
    float w0[] = { 0.75f, 0.25f, 0.5f, 0.5f, 0.75f, 0.25f };
    routing_stats_observe(s, 0, 2, 2, ids0, w0);      /* split over two calls */
    routing_stats_observe(s, 0, 1, 2, ids0 + 4, w0 + 4);
    int32_t ids1[] = { 0, 1, 2, 3, 0, 1 };
    routing_stats_observe(s, 1, 3, 2, ids1, NULL);
    CHECK(s->n_tokens == 3 && s->n_sequences == 1);
    CHECK(s->counts[0] == 2 && s->counts[1] == 3 && s->counts[2] == 1 && s->counts[3] == 0);
    CHECK(fabs(s->weight_sums[0] - 1.5) < 1e-9 && fabs(s->weight_sums[1] - 1.0) < 1e-9);
    /* coactivation: {0,1} twice, {1,2} once; diagonal = counts */
    CHECK(s->coact[0 * 4 + 1] == 2 && s->coact[1 * 4 + 0] == 2 && s->coact[1 * 4 + 2] == 1 && s->coact[0 * 4 + 2] == 0);
    CHECK(s->coact[1 * 4 + 1] == 3);
    /* t1 repeats 1 of t0's; t2 repeats 1 of t1's: 2 hits of 4 choices */
    CHECK(s->next_total[0] == 4 && s->next_hits[0] == 2);
    CHECK(s->next_total[1] == 4 && s->next_hits[1] == 0);
    CHECK(s->window_total[0] == 0); /* no token had 8 predecessors yet */
    /* a new sequence does not look back into the previous one */
    routing_stats_begin_sequence(s);
    routing_stats_observe(s, 0, 1, 2, ids0, w0);
    CHECK(s->next_total[0] == 4);
    /* ids out of range are skipped, other top-k sizes ignored */
    int32_t bad[] = { -1, 7 };
    routing_stats_observe(s, 0, 1, 2, bad, NULL);
    routing_stats_observe(s, 5, 1, 2, ids0, NULL);
    routing_stats_observe(s, 0, 1, 1, ids0, NULL);
    CHECK(s->counts[0] == 3 && s->counts[3] == 0);
    routing_stats_free(s);
}

/* Window repeats: a cycle of period 3 repeats within 8, never on the next token. */
static void test_window(void) {
    struct routing_stats *s = routing_stats_new(1, 6, 2, "");
    routing_stats_begin_sequence(s);
    for (int t = 0; t < 30; t++) {
        int32_t ids[2] = { (t % 3) * 2, (t % 3) * 2 + 1 };
        routing_stats_observe(s, 0, 1, 2, ids, NULL);
    }
    struct routing_layer_summary sum;
    routing_stats_summarize(s, 0, &sum);
    CHECK(sum.repeat_next == 0);
    CHECK(sum.repeat_window == 1);
    CHECK(s->window_total[0] == 2 * (30 - ROUTING_WINDOW));
    CHECK(fabs(sum.entropy_norm - 1) < 1e-9); /* every expert equally often */
    routing_stats_free(s);
}

/* The summary's skew, and the two halves' hot lists. */
static void test_summary(void) {
    struct routing_stats *s = routing_stats_new(1, 20, 1, "");
    routing_stats_begin_sequence(s);
    /* first half: expert 0 half the time, then 1..9; second half: 10..19 only */
    for (int t = 0; t < 100; t++) {
        int32_t e = t % 2 ? 0 : 1 + (t / 2) % 9;
        routing_stats_observe(s, 0, 1, 1, &e, NULL);
    }
    routing_stats_set_phase(s, 1);
    for (int t = 0; t < 100; t++) {
        int32_t e = 10 + t % 10;
        routing_stats_observe(s, 0, 1, 1, &e, NULL);
    }
    struct routing_layer_summary sum;
    routing_stats_summarize(s, 0, &sum);
    CHECK(routing_top10_count(20) == 2);
    CHECK(sum.rows == 200);
    CHECK(fabs(sum.top10_share - (50 + 10) / 200.0) < 0.03); /* expert 0 and one of the tens */
    CHECK(sum.hot_other == 0);                                  /* the halves share nothing */
    CHECK(sum.hot_own > 0.6);
    routing_stats_free(s);
}

static void test_zipf(void) {
    double share[128];
    routing_zipf_shares(128, 8, 0.6, share);
    double sum = 0;
    for (int i = 0; i < 128; i++) sum += share[i];
    CHECK(fabs(sum - 1) < 1e-9);
    CHECK(fabs(share[0] / share[1] - pow(2, 0.6)) < 1e-9);
    CHECK(fabs(routing_zipf_top10_share(128, 8, 0) - 13 / 128.0) < 1e-12);
    /* a steep law is capped: no expert above 1/top_k of the rows */
    routing_zipf_shares(128, 8, 2.0, share);
    sum = 0;
    for (int i = 0; i < 128; i++) { CHECK(share[i] <= 1.0 / 8 + 1e-12); sum += share[i]; }
    CHECK(fabs(sum - 1) < 1e-9);
}

static void test_file(void) {
    struct routing_stats *s = routing_stats_new(3, 16, 4, "model-name");
    s->model_hash = 0x0123456789abcdefull;
    s->model_size = 123456789;
    routing_stats_begin_sequence(s);
    uint32_t x = 1;
    for (int t = 0; t < 200; t++) {
        if (t == 100) routing_stats_set_phase(s, 1);
        for (int l = 0; l < 3; l++) {
            int32_t ids[4];
            float w[4];
            for (int k = 0; k < 4; k++) {
                x = x * 1664525u + 1013904223u;
                ids[k] = (int32_t)(k * 4 + (x >> 28) % 4); /* distinct per token */
                w[k] = 0.25f;
            }
            routing_stats_observe(s, l, 1, 4, ids, w);
        }
    }
    const char *path = path_of("stats.bin");
    CHECK(routing_stats_write(s, path) == 0);
    struct routing_stats *r = routing_stats_read(path);
    CHECKF(r != NULL, "%s", moex_error());
    if (r) {
        CHECK(r->n_layers == 3 && r->n_expert == 16 && r->top_k == 4 && r->n_tokens == 200 && r->n_sequences == 1);
        CHECK(!strcmp(r->model_name, "model-name"));
        CHECK(r->model_hash == s->model_hash && r->model_size == s->model_size);
        CHECK(routing_stats_check_model(r, path, s->model_hash, s->model_size, 3, 16) == 0);
        /* Another model of the same shape: refused, naming the file. */
        CHECK(routing_stats_check_model(r, path, s->model_hash ^ 1, s->model_size, 3, 16) != 0 &&
              strstr(moex_error(), "stats.bin") && strstr(moex_error(), "another model"));
        CHECK(routing_stats_check_model(r, path, s->model_hash, s->model_size + 1, 3, 16) != 0);
        CHECK(routing_stats_check_model(r, path, s->model_hash, s->model_size, 3, 8) != 0);
        CHECK(!memcmp(r->counts, s->counts, 3 * 16 * sizeof *r->counts));
        CHECK(!memcmp(r->counts_first, s->counts_first, 3 * 16 * sizeof *r->counts));
        CHECK(!memcmp(r->weight_sums, s->weight_sums, 3 * 16 * sizeof *r->weight_sums));
        CHECK(!memcmp(r->coact, s->coact, 3 * 16 * 16 * sizeof *r->coact));
        CHECK(!memcmp(r->next_hits, s->next_hits, 3 * sizeof *r->next_hits));
        CHECK(!memcmp(r->window_total, s->window_total, 3 * sizeof *r->window_total));
        routing_stats_free(r);
    }
    /* Broken files: truncated, extended, wrong magic, wrong version, absurd
     * sizes, a reserved field set, a negative (top byte 0xff) or NaN weight
     * sum, more first-half rows than rows, more rows than tokens x top-k. */
    size_t size;
    unsigned char *data = read_whole_file(path, &size);
    CHECK(data != NULL);
    if (data) {
        const char *bad = path_of("bad.bin");
        size_t names = 64 + strlen("model-name"), le = 3 * 16;
        struct { size_t len; size_t at; unsigned char value; const char *what; } cases[] = {
            { 0, 0, 0, "truncated" }, { 1, 0, 0, "extended" }, { 2, 0, 'X', "magic" }, { 2, 8, 9, "version" },
            { 2, 12, 0, "layers" }, { 2, 16, 0xff, "experts" }, { 2, 44, 1, "reserved" },
            { 2, names + 16 * le + 7, 0xff, "negative weight sum" }, { 2, names + 8 * le + 7, 0x7f, "first half" },
            { 3, names + 16 * le, 0, "NaN weight sum" },
            /* rows past n_tokens x top_k (fuzz_stats: counts whose sum wrapped 64 bits) */
            { 2, names + 7, 0x7f, "rows over tokens x top-k" }, { 2, names + 8 * 15 + 7, 0x01, "rows over, last expert" },
        };
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            FILE *f = fopen(bad, "wb");
            unsigned char saved = data[cases[c].at];
            unsigned char saved8[8];
            memcpy(saved8, data + cases[c].at, 8);
            double nan_sum = NAN;
            if (cases[c].len == 2) data[cases[c].at] = cases[c].value;
            if (cases[c].len == 3) memcpy(data + cases[c].at, &nan_sum, 8);
            size_t n = cases[c].len == 0 ? size - 8 : size;
            fwrite(data, 1, n, f);
            if (cases[c].len == 1) fputc(0, f);
            fclose(f);
            data[cases[c].at] = saved;
            memcpy(data + cases[c].at, saved8, 8);
            struct routing_stats *b = routing_stats_read(bad);
            CHECKF(b == NULL && strstr(moex_error(), "bad.bin"), "%s: accepted or no message", cases[c].what);
            routing_stats_free(b);
        }
        free(data);
    }
    CHECK(routing_stats_read(path_of("missing.bin")) == NULL);
    CHECK(routing_stats_new(0, 4, 2, "") == NULL && routing_stats_new(2, 4, 5, "") == NULL);
    routing_stats_free(s);
}

int main(void) {
    test_counts();
    test_window();
    test_summary();
    test_zipf();
    test_file();
    return test_finish();
}
