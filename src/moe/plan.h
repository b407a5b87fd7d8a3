/* The placement planner, pure: the model's MoE layers and dense matmuls, a
 * device's capabilities, the budget and the routing statistics in; a
 * placement out (the slot geometry, the staging, the backbone's slots, the
 * pinned experts). It opens nothing and allocates no device memory, so a
 * run, `moex pack` and the tests plan alike, with or without a device.
 *
 *   plan (this file)  ->  residency (residency.h: slots, pack file, cache)
 *                     ->  run (executor_run.c: staging, submissions, fences)
 */
#ifndef MOEX_PLAN_H
#define MOEX_PLAN_H

#include "dev/dev.h"
#include "moe/expert_cache.h"
#include "moe/moe_layers.h"
#include "pack/pack.h"

#include <stdbool.h>
#include <stdint.h>

/* Each resident expert takes three device slots: gate, up, down. */
enum { MATS = 3 };

/* The device's staging buffers: rows of device pairs, packed in expert
 * order, at most STAGE_TOKENS tokens' worth (a bigger batch's extra experts
 * run on the CPU). A constant, so that a run and `moex pack` plan the same
 * slots from the same budget. */
enum { STAGE_TOKENS = 512 };
enum { BUF_ACT, BUF_GATE_UP, BUF_H, BUF_OUT, N_STAGE_BUFS };

struct stage_layout {
    int rows;
    uint64_t bytes[N_STAGE_BUFS];
    uint64_t scale_offset[N_STAGE_BUFS]; /* act and h: where the row scales start */
    uint64_t total;                      /* as the device counts them */
};
/* The staging buffers' layout; their total as a device of caps counts them. */
struct stage_layout moe_stage_layout(const struct dev_caps *caps, int n_embd, int n_ff, int top_k);

/* Output channels per slot of a dense matmul w in slots of slot_values
 * values and max_n channels on a device of these caps: its slots (w's N cut
 * in chunks of *chunk_rows), or 0 when it is outside the envelope. */
int dense_geometry(const struct dev_caps *caps, int64_t slot_values, int max_n, const struct matrix *w,
                       int *chunk_rows);

struct moe_plan_input {
    const struct moe_model_desc *desc;
    const struct dev_caps *caps;  /* the device's capabilities (its name only for reports) */
    uint64_t hot_budget;          /* bytes, when hot_fraction is 0 */
    double hot_fraction;          /* > 0: that share of all experts, the staging and the backbone on top */
    bool no_backbone;
    const double *rates;          /* (layers * experts) routing rates from statistics, or NULL */
    uint64_t stats_hash;          /* XXH64 of the statistics file; 0 without one */
    double pinned_share;          /* share of the expert slots pinned from the statistics (< 0: 0.25) */
};

/* What the executor plans for a model before any device memory: the device,
 * its slot geometry and layout, the budget and the pinned experts. moex pack
 * packs this plan's experts, so that a run with the same options finds them. */
struct moe_device_plan {
    char device[16];           /* the device's name (reports, pack files); "": experts stay on the CPU (note) */
    enum pack_layout layout;
    int k_multiple, n_multiple;
    int64_t slot_values;       /* dev_pool_alloc's slot geometry */
    int max_n;
    uint64_t role_bytes[MATS]; /* a block device's slot bytes for each matrix of an expert (gate, up, down): the
                                  largest of its GGUF rows over the layers, 64-byte aligned, so that the pool holds
                                  each in a slot of its own size (dev_pool_alloc_sized: expert slot e's matrix i
                                  at e * MATS + i, the backbone's after them at the slot type's size); zeros on
                                  W8A8 devices, whose slots are one size */
    uint64_t expert_bytes;     /* device bytes of one expert: three slots */
    uint64_t staging_bytes;    /* the device's staging buffers for activations and outputs */
    uint64_t budget_bytes;     /* all of it: staging first, then the backbone, then expert slots */
    uint64_t backbone_bytes;   /* the resident dense matmuls' slots */
    int backbone_slots;        /* their slots, after the experts' */
    int32_t *dense_slot;       /* (d->n_dense) a resident dense matmul's first slot among them, or -1 */
    uint64_t stats_hash;
    double pinned_share;
    struct placement plan;
    double expected_share;     /* of routed rows, on the pinned experts by the statistics; without them the
                                  slots' share of all experts (a uniform guess) */
    char note[256];            /* why nothing is resident, or what the plan changed (a budget over the windows) */
};

/* A block device's slot type for the model: the widest (in bytes per
 * value) of the expert types it takes, so that every expert fits a slot
 * (dev_set_slot_type before planning); 0 for W8A8 devices or when it
 * takes none. */
enum qtype moe_plan_slot_type(const struct moe_model_desc *d, const struct dev_caps *caps);

/* -1 with moex_error() when out of memory; 0 otherwise, device "" when
 * nothing can be resident (the note says why). */
int moe_plan(const struct moe_plan_input *in, struct moe_device_plan *out);
void moe_device_plan_free(struct moe_device_plan *p);

/* Routing statistics for the plan: per (layer, expert) rates, malloc'd, and
 * the file's hash. -1 with moex_error() for a file that does not fit the model. */
int moe_plan_load_stats(const struct moe_model_desc *d, const char *path, double **rates, uint64_t *hash);

#endif
