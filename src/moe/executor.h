/* The expert executor with a device: per batch and per expert, the rows of
 * each active expert run either on the device (when rows >= the device's min
 * M, the shape is in its envelope, and the expert is resident or worth
 * packing now) or on the CPU straight from the quantized weights. All device
 * work of a layer is queued on the device's stream (its host steps too:
 * packing admitted experts, staging activations in and outputs out, the
 * gating between) as two submissions (gate+up, then down); while the
 * device's worker runs them the CPU threads run the cold experts; then the
 * executor waits on the last fence and combines the outputs. Any device error moves the work to the CPU for
 * the rest of the run; it is counted and reported once. */
#ifndef MOEX_EXECUTOR_H
#define MOEX_EXECUTOR_H

#include "moe/expert_cache.h"
#include "pack/pack.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct moe_model_desc;
struct threadpool;
struct trace;
struct moe_scratch;

struct moe_exec_options {
    const char *device;        /* "cpu", "amx", "sim", "auto" (amx where present), NULL or "none": CPU only */
    uint64_t hot_budget;       /* resident device bytes: the staging buffers first, then expert slots;
                                  0 with hot_fraction 0: no device slots */
    double hot_fraction;       /* > 0: this share of all experts' device bytes, the staging on top */
    int min_m;                 /* 0: the device's own figure */
    const char *stats_path;    /* routing statistics (moex profile) for the pinned core; NULL: none */
    double pinned_share;       /* share of the expert slots pinned from stats (default 0.25 when < 0) */
    bool no_overlap;           /* run device and CPU work one after the other */
    const char *sim_figures;   /* sim: "rk3588[,key=value...]" */
    struct trace *trace;       /* timeline, or NULL */
    double cpu_row_ns;         /* > 0: the CPU's time per routed row for admission decisions;
                                  0: a fixed model of it (3 * n_embd * n_ff / 40 ns) */
    bool adaptive;             /* admission follows the CPU times measured in this run (results
                                  then vary run to run); ignored when cpu_row_ns > 0 */
    const char *pack_path;     /* pack file (moex pack) to fill device slots from; NULL: pack live */
    /* Filling the pinned experts at start: done of total after each; NULL: silent. */
    void (*progress)(void *user, const char *label, uint64_t done, uint64_t total);
    void *progress_user;
};

enum moe_phase { MOE_PREFILL = 0, MOE_DECODE = 1, MOE_PHASES = 2 };

struct moe_phase_counters {
    uint64_t batches, rows_device, rows_cpu;   /* routed (token, expert) rows */
    uint64_t submissions, jobs;                  /* jobs: one per matrix */
    uint64_t packs, loads;                       /* experts (three matrices each) packed live / filled
                                                    from the pack file */
    uint64_t hits, misses, admissions, evictions, fallbacks;  /* expert uses with rows >= min M */
    uint64_t hit_rows, miss_rows, hit_bytes, miss_bytes;       /* the same weighted by rows / by the
                                                                  expert's GGUF bytes in its layer */
    int64_t device_ns, cpu_ns, wall_ns, pack_ns;               /* device: busy (modelled on sim) */
    int64_t load_ns;                                           /* loading from the pack file (modelled on sim) */
    /* The experts' time with the device's modelled busy and pack times in
     * place of the host's simulation of them: per layer the longer of the
     * CPU side and the device side when overlapped, their sum when not.
     * Equals wall_ns for devices with real clocks and for CPU-only runs. */
    int64_t modelled_ns;
};

struct moe_executor;

/* An executor for the MoE layers d describes (moe/moe_layers.h; d's layers
 * must outlive it). NULL with moex_error() on a bad option, an unusable stats
 * file or MoE layers of different shapes. A device that cannot be opened or
 * allocated is not an error: the executor runs on the CPU and says why in
 * moe_executor_note(). */
struct moe_executor *moe_executor_new(const struct moe_model_desc *d, struct threadpool *pool, int max_tokens,
                                      const struct moe_exec_options *opt);
void moe_executor_free(struct moe_executor *e);

/* MoE layer `layer` (an index into the description, not the model's layer):
 * out[t] = sum_k w[t][k] * expert_{ids[t][k]}(x[t]). */
void moe_executor_run(struct moe_executor *e, int layer, struct moe_scratch *s, const float *x, int n_tokens,
                      const int32_t *ids, const float *weights, float *out);

const struct moe_phase_counters *moe_executor_counters(const struct moe_executor *e, enum moe_phase phase);
void moe_executor_reset_counters(struct moe_executor *e);
/* Resident device bytes (slot pool and staging buffers), of them the
 * staging, and the slots: pinned, total. */
uint64_t moe_executor_resident_bytes(const struct moe_executor *e);
uint64_t moe_executor_staging_bytes(const struct moe_executor *e);
void moe_executor_slots(const struct moe_executor *e, int *pinned, int *total);
/* The board model (sim figure board=1), whose times the counters'
 * modelled_ns then hold for every layer; NULL otherwise. */
struct board;
const struct board *moe_executor_board(const struct moe_executor *e);
/* Whether device times are modelled (sim), so that wall times mean little. */
bool moe_executor_modelled(const struct moe_executor *e);
/* The pack file: whether it was used, why not, and the start-up it made. */
struct moe_pack_report {
    const char *path;          /* the pack file asked for (moe_exec_options.pack_path), or NULL */
    int status;                /* PACKFILE_OK (0) when used, else why it was refused (pack/packfile.h) */
    bool plan_used;            /* the file's plan (pinned experts) replaced this run's */
    char message[768];         /* "" or one line: why the file was refused, or why its plan was not used */
    int experts_loaded;        /* pinned experts filled from the file at start */
    int experts_packed;        /* pinned experts packed live at start */
    int64_t fill_ns;           /* time filling the pinned experts' slots at start */
    int64_t fill_device_ns;    /* the device's packing and loading time in it (modelled on sim) */
};
const struct moe_pack_report *moe_executor_pack_report(const struct moe_executor *e);

/* What the executor plans for a model before any device memory: the device,
 * its slot geometry and layout, the budget and the pinned experts. moex pack
 * packs this plan's experts, so that a run with the same options finds them. */
struct moe_device_plan {
    char device[16];           /* "cpu", "amx", "sim"; "": experts stay on the CPU (note says why) */
    enum pack_layout layout;
    int k_multiple, n_multiple;
    int64_t slot_values;       /* dev_pool_alloc's slot geometry */
    int max_n;
    uint64_t expert_bytes;     /* device bytes of one expert: three slots */
    uint64_t staging_bytes;    /* the device's staging buffers for activations and outputs */
    uint64_t budget_bytes;     /* all of it: staging first, then expert slots */
    uint64_t stats_hash;       /* XXH64 of the statistics file; 0 without one */
    double pinned_share;
    struct placement plan;
    char note[256];
};
/* -1 with moex_error() on a bad option or statistics file; 0 otherwise,
 * device "" when no expert can be resident. */
int moe_device_plan(const struct moe_model_desc *d, const struct moe_exec_options *o, struct moe_device_plan *out);
void moe_device_plan_free(struct moe_device_plan *p);

/* "" or one line: why the device is not used, or the first device error. */
const char *moe_executor_note(const struct moe_executor *e);
/* The device's name, or "none". */
const char *moe_executor_device(const struct moe_executor *e);
/* The --profile table. */
void moe_executor_print(const struct moe_executor *e, FILE *out);

#endif
