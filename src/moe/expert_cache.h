/* Which experts are resident on the device: a fixed pool of slots, a pinned
 * core chosen from routing statistics, and a recency-managed tail whose
 * admissions are cost decisions. Pure bookkeeping: the executor packs and
 * submits; this decides. */
#ifndef MOEX_EXPERT_CACHE_H
#define MOEX_EXPERT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

/* Placement: what the planner makes of the budget. */
struct placement_input {
    int n_layers, n_expert;
    const double *expert_rate;    /* (n_layers, n_expert) routed rows per token, or NULL (no stats) */
    uint64_t slot_bytes;          /* device bytes of one expert (gate + up + down) */
    uint64_t budget_bytes;        /* everything resident must fit */
    uint64_t backbone_bytes;      /* dense weights made resident, counted first */
    double pinned_share;          /* of the expert slots, the share pinned from stats (0..1) */
};

struct placement {
    int n_slots;                  /* expert slots the budget holds */
    int n_pinned;                 /* the first n_pinned slots are pinned */
    int32_t *pinned;              /* (n_pinned) layer * n_expert + expert, most valuable first */
};

/* Pins the experts that buy the most time per resident byte: every expert
 * has the same packed size, so that is the highest routing rate. Without
 * stats nothing is pinned and every slot is cache. When the budget holds
 * every expert, all are pinned. -1 on out of memory. */
int placement_plan(const struct placement_input *in, struct placement *out);
void placement_free(struct placement *p);

/* The slot pool at run time. */
struct expert_cache;

struct expert_cache *expert_cache_new(int n_layers, int n_expert, const struct placement *plan);
void expert_cache_free(struct expert_cache *c);
/* Slot holding (layer, expert), or -1. Counts nothing. */
int expert_cache_lookup(const struct expert_cache *c, int layer, int expert);
/* Marks a use (recency, rate). */
void expert_cache_touch(struct expert_cache *c, int layer, int expert, int rows);
/* The admission rule: is packing (layer, expert) now worth its cost? gain is
 * the time the device saves per row over the CPU, pack the cost of packing
 * one expert (same units). The rows of this batch count in full, the
 * expert's recent rate (rows per batch, decayed) stands for future reuse. */
bool expert_cache_should_admit(const struct expert_cache *c, int layer, int expert, int rows, double gain_per_row,
                               double pack_cost);
/* The same, counting what the admission would evict: the newcomer's value
 * must pay the pack and the victim's expected reuse (the least recently used
 * unpinned tenant not `busy`), or a full cache churns for nothing. */
bool expert_cache_worth_admitting(const struct expert_cache *c, int layer, int expert, int rows, double gain_per_row,
                                  double pack_cost, const bool *busy);
/* Takes a slot for (layer, expert), evicting the least recently used
 * unpinned tenant that is not `busy` (used by the current batch). Returns
 * the slot, or -1 when every slot is pinned or busy; *evicted gets the old
 * tenant's key (layer * n_expert + expert) or -1. */
int expert_cache_admit(struct expert_cache *c, int layer, int expert, const bool *busy, int32_t *evicted);
/* Ends a batch: decays recent rates and advances the clock. */
void expert_cache_end_batch(struct expert_cache *c);
int expert_cache_slots(const struct expert_cache *c);
/* The key held by a slot, or -1 when empty. */
int32_t expert_cache_tenant(const struct expert_cache *c, int slot);
bool expert_cache_is_pinned(const struct expert_cache *c, int slot);

/* Offline evaluation on a recorded routing trace (keys of experts used per
 * batch, batch boundaries in `batch_start`): hits of an LRU cache of
 * `capacity` slots (with `pinned` keys always resident and counted in the
 * capacity) and of Belady's optimal policy, counted in accesses. */
struct cache_sim_result { int64_t accesses, lru_hits, belady_hits; };
struct cache_sim_result cache_simulate(const int32_t *keys, const int64_t *batch_start, int64_t n_batches,
                                       int n_keys_total, int capacity, const int32_t *pinned, int n_pinned);

#endif
