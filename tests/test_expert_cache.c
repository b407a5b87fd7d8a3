#include "harness.h"

#include "moe/expert_cache.h"

#include <stdlib.h>
#include <string.h>

static void test_plan(void) {
    double rate[2 * 4] = { 0.1, 0.9, 0.0, 0.5, 0.3, 0.2, 0.8, 0.0 };
    struct placement_input in = { 2, 4, rate, 100, 1000, 300, 0.5 };
    struct placement p;
    CHECK(placement_plan(&in, &p) == 0);
    CHECK(p.n_slots == 7);                 /* (1000 - 300) / 100 */
    CHECK(p.n_pinned == 3);                /* half of 7 */
    CHECK(p.pinned[0] == 1 && p.pinned[1] == 6 && p.pinned[2] == 3);
    placement_free(&p);

    in.backbone_bytes = 2000;              /* the backbone alone is over budget: no slots, nothing fails */
    CHECK(placement_plan(&in, &p) == 0 && p.n_slots == 0 && p.n_pinned == 0);
    placement_free(&p);

    in.backbone_bytes = 0; in.budget_bytes = 1 << 20; in.pinned_share = 1;
    CHECK(placement_plan(&in, &p) == 0);
    CHECK(p.n_slots == 8);                 /* capped at the number of experts */
    CHECK(p.n_pinned == 8);                /* everything fits: everything pinned */
    placement_free(&p);

    in.budget_bytes = 700;                 /* 7 of 8: unrouted experts are never pinned */
    CHECK(placement_plan(&in, &p) == 0 && p.n_slots == 7 && p.n_pinned == 6);
    placement_free(&p);

    in.expert_rate = NULL;                 /* no stats: everything is cache */
    CHECK(placement_plan(&in, &p) == 0 && p.n_slots == 7 && p.n_pinned == 0);
    placement_free(&p);
}

static void test_cache(void) {
    double rate[8] = { 0, 1, 0, 0, 0, 0, 0, 0 };
    struct placement_input in = { 2, 4, rate, 10, 30, 0, 0.34 };
    struct placement p;
    placement_plan(&in, &p);
    CHECK(p.n_slots == 3 && p.n_pinned == 1);
    struct expert_cache *c = expert_cache_new(2, 4, &p);
    CHECK(expert_cache_lookup(c, 0, 1) == 0 && expert_cache_is_pinned(c, 0));
    CHECK(expert_cache_lookup(c, 1, 2) == -1);
    int32_t ev;
    int s1 = expert_cache_admit(c, 1, 2, NULL, &ev);
    CHECK(s1 > 0 && ev == -1);
    expert_cache_end_batch(c);
    int s2 = expert_cache_admit(c, 0, 3, NULL, &ev);
    CHECK(s2 > 0 && s2 != s1 && ev == -1);
    expert_cache_end_batch(c);
    expert_cache_touch(c, 0, 3, 4);        /* (1,2) is now the least recent */
    int s3 = expert_cache_admit(c, 1, 0, NULL, &ev);
    CHECK(s3 == s1 && ev == 1 * 4 + 2);
    CHECK(expert_cache_lookup(c, 1, 2) == -1 && expert_cache_lookup(c, 1, 0) == s1);
    bool busy[3] = { false, true, true };  /* nothing evictable: pinned or busy */
    CHECK(expert_cache_admit(c, 1, 3, busy, &ev) == -1);
    /* Admission: rows in this batch and recent use must pay the pack cost. */
    CHECK(!expert_cache_should_admit(c, 1, 3, 1, 1.0, 10.0));
    CHECK(expert_cache_should_admit(c, 1, 3, 11, 1.0, 10.0));
    expert_cache_touch(c, 1, 3, 4);        /* recent rows count as expected reuse */
    CHECK(expert_cache_should_admit(c, 1, 3, 1, 1.0, 10.0));
    /* ...but not when the slot it would take holds an expert worth more. */
    bool none_busy[3] = { false, false, false };
    CHECK(expert_cache_worth_admitting(c, 1, 3, 11, 1.0, 10.0, none_busy));   /* victim (0,3) recent 4*0.5 */
    expert_cache_touch(c, 0, 3, 100);
    expert_cache_touch(c, 1, 0, 100);
    CHECK(!expert_cache_worth_admitting(c, 1, 3, 11, 1.0, 10.0, none_busy));
    expert_cache_free(c);
    placement_free(&p);
}

static void test_simulation(void) {
    /* A cyclic pattern over 4 keys with 3 slots: LRU always misses, Belady
     * keeps two of them. */
    int32_t keys[40];
    int64_t starts[41];
    for (int i = 0; i < 40; i++) { keys[i] = i % 4; starts[i] = i; }
    starts[40] = 40;
    struct cache_sim_result r = cache_simulate(keys, starts, 40, 4, 3, NULL, 0);
    CHECK(r.accesses == 40);
    CHECK(r.lru_hits == 0);
    CHECK(r.belady_hits >= 20);
    /* Pinned keys always hit. */
    int32_t pin = 0;
    r = cache_simulate(keys, starts, 40, 4, 3, &pin, 1);
    CHECK(r.lru_hits >= 10 && r.belady_hits >= r.lru_hits);
    /* Everything fits: only compulsory misses. */
    r = cache_simulate(keys, starts, 40, 4, 4, NULL, 0);
    CHECK(r.lru_hits == 36 && r.belady_hits == 36);
}

int main(void) {
    test_plan();
    test_cache();
    test_simulation();
    return test_finish();
}
