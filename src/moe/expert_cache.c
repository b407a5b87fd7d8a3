#include "moe/expert_cache.h"

#include <stdlib.h>
#include <string.h>

/* Future batches an expert's recent rate is expected to last: with trained
 * routers about 45% of a token's experts repeat on the next token and 80%
 * within 8 tokens, so a recently busy expert is likely to be needed again
 * within a few batches. */
#define REUSE_HORIZON 4.0
/* Per batch, the recent rate keeps this share of its past. */
#define RATE_DECAY 0.5

struct expert_cache {
    int n_layers, n_expert, n_slots;
    int32_t *slot_of;     /* (n_layers * n_expert) slot or -1 */
    int32_t *tenant;      /* (n_slots) key or -1 */
    int64_t *last_use;    /* (n_slots) clock of the last touch */
    bool *pinned;         /* (n_slots) */
    double *recent_rows;  /* (n_layers * n_expert) decayed rows per batch */
    int64_t clock;
};

struct rated { double rate; int32_t key; };

static int by_rate_desc(const void *a, const void *b) {
    const struct rated *x = a, *y = b;
    if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
    return x->key - y->key;
}

int placement_plan(const struct placement_input *in, struct placement *out) {
    memset(out, 0, sizeof *out);
    int n_keys = in->n_layers * in->n_expert;
    uint64_t avail = in->budget_bytes > in->backbone_bytes ? in->budget_bytes - in->backbone_bytes : 0;
    uint64_t slots = in->slot_bytes ? avail / in->slot_bytes : 0;
    out->n_slots = slots > (uint64_t)n_keys ? n_keys : (int)slots;
    if (out->n_slots == n_keys && n_keys > 0) {
        /* Everything fits: every expert is packed once, at start. */
        out->pinned = malloc(sizeof *out->pinned * (size_t)n_keys);
        if (!out->pinned) return -1;
        for (int k = 0; k < n_keys; k++) out->pinned[k] = k;
        out->n_pinned = n_keys;
        return 0;
    }
    if (!in->expert_rate || out->n_slots == 0) return 0;
    double share = in->pinned_share < 0 ? 0 : in->pinned_share > 1 ? 1 : in->pinned_share;
    int n_pin = (int)(out->n_slots * share);
    if (n_pin == 0) return 0;
    struct rated *r = malloc(sizeof *r * (size_t)n_keys);
    out->pinned = malloc(sizeof *out->pinned * (size_t)n_pin);
    if (!r || !out->pinned) { free(r); placement_free(out); return -1; }
    for (int k = 0; k < n_keys; k++) r[k] = (struct rated){ in->expert_rate[k], k };
    qsort(r, (size_t)n_keys, sizeof *r, by_rate_desc);
    /* Never pin an expert that was not routed at all: a cache slot is worth more. */
    while (n_pin > 0 && r[n_pin - 1].rate <= 0) n_pin--;
    for (int i = 0; i < n_pin; i++) out->pinned[i] = r[i].key;
    out->n_pinned = n_pin;
    free(r);
    return 0;
}

void placement_free(struct placement *p) {
    free(p->pinned);
    memset(p, 0, sizeof *p);
}

struct expert_cache *expert_cache_new(int n_layers, int n_expert, const struct placement *plan) {
    struct expert_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    int n_keys = n_layers * n_expert, n = plan->n_slots;
    c->n_layers = n_layers;
    c->n_expert = n_expert;
    c->n_slots = n;
    c->slot_of = malloc(sizeof *c->slot_of * (size_t)n_keys);
    c->recent_rows = calloc((size_t)n_keys, sizeof *c->recent_rows);
    c->tenant = malloc(sizeof *c->tenant * (size_t)(n ? n : 1));
    c->last_use = calloc((size_t)(n ? n : 1), sizeof *c->last_use);
    c->pinned = calloc((size_t)(n ? n : 1), sizeof *c->pinned);
    if (!c->slot_of || !c->recent_rows || !c->tenant || !c->last_use || !c->pinned) {
        expert_cache_free(c);
        return NULL;
    }
    for (int k = 0; k < n_keys; k++) c->slot_of[k] = -1;
    for (int s = 0; s < n; s++) c->tenant[s] = -1;
    for (int s = 0; s < plan->n_pinned && s < n; s++) {
        c->tenant[s] = plan->pinned[s];
        c->slot_of[plan->pinned[s]] = s;
        c->pinned[s] = true;
    }
    return c;
}

void expert_cache_free(struct expert_cache *c) {
    if (!c) return;
    free(c->slot_of); free(c->recent_rows); free(c->tenant); free(c->last_use); free(c->pinned);
    free(c);
}

int expert_cache_lookup(const struct expert_cache *c, int layer, int expert) {
    return c->slot_of[layer * c->n_expert + expert];
}

void expert_cache_touch(struct expert_cache *c, int layer, int expert, int rows) {
    int key = layer * c->n_expert + expert;
    c->recent_rows[key] += rows;
    if (c->slot_of[key] >= 0) c->last_use[c->slot_of[key]] = c->clock;
}

bool expert_cache_should_admit(const struct expert_cache *c, int layer, int expert, int rows, double gain_per_row,
                               double pack_cost) {
    if (c->n_slots == 0 || gain_per_row <= 0) return false;
    double recent = c->recent_rows[layer * c->n_expert + expert];
    return gain_per_row * (rows + recent * REUSE_HORIZON) > pack_cost;
}

/* The slot an admission would take: a free one, else the least recently
 * used unpinned tenant not busy; -1 when there is none. */
static int pick_victim(const struct expert_cache *c, const bool *busy) {
    int victim = -1;
    for (int s = 0; s < c->n_slots; s++) {
        if (c->pinned[s] || (busy && busy[s])) continue;
        if (c->tenant[s] < 0) return s;
        if (victim < 0 || c->last_use[s] < c->last_use[victim]) victim = s;
    }
    return victim;
}

bool expert_cache_worth_admitting(const struct expert_cache *c, int layer, int expert, int rows, double gain_per_row,
                                  double pack_cost, const bool *busy) {
    if (!expert_cache_should_admit(c, layer, expert, rows, gain_per_row, pack_cost)) return false;
    int victim = pick_victim(c, busy);
    if (victim < 0) return false;
    if (c->tenant[victim] < 0) return true;
    double mine = gain_per_row * (rows + c->recent_rows[layer * c->n_expert + expert] * REUSE_HORIZON);
    double theirs = gain_per_row * c->recent_rows[c->tenant[victim]] * REUSE_HORIZON;
    return mine - pack_cost > theirs;
}

int expert_cache_admit(struct expert_cache *c, int layer, int expert, const bool *busy, int32_t *evicted) {
    int key = layer * c->n_expert + expert;
    *evicted = -1;
    if (c->slot_of[key] >= 0) return c->slot_of[key];
    int victim = pick_victim(c, busy);
    if (victim < 0) return -1;
    if (c->tenant[victim] >= 0) {
        *evicted = c->tenant[victim];
        c->slot_of[c->tenant[victim]] = -1;
    }
    c->tenant[victim] = key;
    c->slot_of[key] = victim;
    c->last_use[victim] = c->clock;
    return victim;
}

void expert_cache_end_batch(struct expert_cache *c) {
    int n_keys = c->n_layers * c->n_expert;
    for (int k = 0; k < n_keys; k++) c->recent_rows[k] *= RATE_DECAY;
    c->clock++;
}

int expert_cache_slots(const struct expert_cache *c) { return c->n_slots; }
int32_t expert_cache_tenant(const struct expert_cache *c, int slot) { return c->tenant[slot]; }
bool expert_cache_is_pinned(const struct expert_cache *c, int slot) { return c->pinned[slot]; }

struct cache_sim_result cache_simulate(const int32_t *keys, const int64_t *batch_start, int64_t n_batches,
                                       int n_keys_total, int capacity, const int32_t *pinned, int n_pinned) {
    struct cache_sim_result r = { 0, 0, 0 };
    int64_t n_access = batch_start[n_batches];
    bool *is_pinned = calloc((size_t)n_keys_total, sizeof *is_pinned);
    int64_t *last = malloc(sizeof *last * (size_t)n_keys_total);
    int64_t *next_use = malloc(sizeof *next_use * (size_t)(n_access ? n_access : 1));
    int64_t *batch_of = malloc(sizeof *batch_of * (size_t)(n_access ? n_access : 1));
    int32_t *lru = malloc(sizeof *lru * (size_t)(capacity > 0 ? capacity : 1));
    int64_t *lru_time = malloc(sizeof *lru_time * (size_t)(capacity > 0 ? capacity : 1));
    int32_t *opt = malloc(sizeof *opt * (size_t)(capacity > 0 ? capacity : 1));
    int64_t *opt_next = malloc(sizeof *opt_next * (size_t)(capacity > 0 ? capacity : 1));
    if (!is_pinned || !last || !next_use || !batch_of || !lru || !lru_time || !opt || !opt_next) goto done;
    for (int i = 0; i < n_pinned; i++) is_pinned[pinned[i]] = true;
    int free_slots = capacity - n_pinned;
    if (free_slots < 0) free_slots = 0;
    for (int64_t b = 0; b < n_batches; b++)
        for (int64_t i = batch_start[b]; i < batch_start[b + 1]; i++) batch_of[i] = b;
    /* next batch in which each access's key is used again */
    for (int k = 0; k < n_keys_total; k++) last[k] = INT64_MAX;
    for (int64_t i = n_access - 1; i >= 0; i--) {
        next_use[i] = last[keys[i]];
        last[keys[i]] = batch_of[i];
    }
    int n_lru = 0, n_opt = 0;
    for (int64_t i = 0; i < n_access; i++) {
        int32_t k = keys[i];
        r.accesses++;
        if (is_pinned[k]) { r.lru_hits++; r.belady_hits++; continue; }
        int hit = -1;
        for (int s = 0; s < n_lru; s++) if (lru[s] == k) hit = s;
        if (hit >= 0) { r.lru_hits++; lru_time[hit] = i; }
        else if (free_slots > 0) {
            int s = 0;
            if (n_lru < free_slots) s = n_lru++;
            else
                for (int j = 1; j < n_lru; j++) if (lru_time[j] < lru_time[s]) s = j;
            lru[s] = k;
            lru_time[s] = i;
        }
        hit = -1;
        for (int s = 0; s < n_opt; s++) if (opt[s] == k) hit = s;
        if (hit >= 0) { r.belady_hits++; opt_next[hit] = next_use[i]; }
        else if (free_slots > 0) {
            int s;
            if (n_opt < free_slots) s = n_opt++;
            else {
                s = 0;
                for (int j = 1; j < n_opt; j++) if (opt_next[j] > opt_next[s]) s = j;
                /* Bypass: keeping the current tenants is better when the
                 * newcomer is needed later than all of them. */
                if (next_use[i] >= opt_next[s]) continue;
            }
            opt[s] = k;
            opt_next[s] = next_use[i];
        }
    }
done:
    free(is_pinned); free(last); free(next_use); free(batch_of); free(lru); free(lru_time); free(opt); free(opt_next);
    return r;
}
