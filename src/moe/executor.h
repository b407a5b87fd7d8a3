/* The executor with a device: per batch and per expert, the rows of each
 * active expert run either on the device (when rows >= the device's min M,
 * the shape is in its envelope, and the expert is resident or worth packing
 * now) or on the CPU straight from the quantized weights. All device work of
 * a layer is queued on the device's stream (its host steps too: packing
 * admitted experts, staging activations in and outputs out, the gating
 * between) as two submissions (gate+up, then down); while the device's
 * worker runs them the CPU threads run the cold experts; then the executor
 * waits on the last fence and combines the outputs. The dense matmuls
 * (attention projections, shared experts, dense FFN layers, the lm head) go
 * through the same rule (executor_dense; docs/placement.md): the
 * resident ones (the backbone, counted in the budget before the experts)
 * run on the device when their rows reach min M. Any device error moves the
 * work to the CPU for the rest of the run; it is counted and reported once. */
#ifndef MOEX_EXECUTOR_H
#define MOEX_EXECUTOR_H

#include "moe/expert_cache.h"
#include "moe/moe_layers.h"
#include "moe/plan.h"
#include "pack/pack.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct matrix;
struct threadpool;
struct trace;
struct moe_scratch;
struct packfile_shared;

struct moe_exec_options {
    const char *device;        /* a name of the device table (dev/dev.h); NULL or "none": CPU only */
    uint64_t hot_budget;       /* resident device bytes: the staging buffers first, then the dense
                                  matmuls (the backbone), then expert slots; 0 with hot_fraction 0:
                                  no device slots */
    double hot_fraction;       /* > 0: this share of all experts' device bytes, the staging and the
                                  whole backbone on top */
    int min_m;                 /* 0: the device's own figure */
    const char *stats_path;    /* routing statistics (moex profile) for the pinned core; NULL: none */
    double pinned_share;       /* share of the expert slots pinned from stats (default 0.25 when < 0) */
    bool no_overlap;           /* run device and CPU work one after the other */
    bool no_backbone;          /* no dense matmul resident: they run on the CPU, the budget is the experts' */
    const char *device_spec;   /* the device's own options (the sim's figures "rk3588[,key=value...]"), parsed
                                  once by the device */
    struct trace *trace;       /* timeline, or NULL */
    double cpu_row_ns;         /* > 0: the CPU's time per routed row for admission decisions;
                                  0: a fixed model of it (3 * n_embd * n_ff / 40 ns) */
    bool adaptive;             /* admission follows the CPU times measured in this run (results
                                  then vary run to run); ignored when cpu_row_ns > 0 */
    const char *pack_path;     /* pack file (moex pack) to fill device slots from; NULL: pack live */
    const struct packfile_shared *pack_shared; /* that file opened once by the caller, or NULL (opened here) */
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
/* Dense matmuls: y[i] (n, w[i]->rows) = x (n, K) . w[i]^T for i < k
 * (k <= DENSE_GROUP_MAX), every w[i] of K = cols reading the same rows
 * x. Each goes through the experts' rule: described to the executor
 * (moe_model_desc.dense), resident (the backbone), n >= the device's min M
 * and worth the device by its cost model (the submission, per job, per
 * weight byte, per MAC against the CPU's time); those run on the device
 * now, in one submission per pass of rows that fit the staging buffers,
 * W8A8. Returns the bitmask of the matrices left to the caller, to run on
 * the CPU (counted when described); a device error returns them all and
 * moves the rest of the run to the CPU. */
enum { DENSE_GROUP_MAX = 8 };
unsigned executor_dense(struct moe_executor *e, int k, const struct matrix *const *w, float *const *y,
                            const float *x, int n);
/* The phase of the batch about to be evaluated, for all its matmuls and
 * expert layers: decode when it adds one token to each of its sequences (a
 * batched decode step of several sequences included), else prefill. */
void moe_executor_begin_batch(struct moe_executor *e, enum moe_phase phase);

struct dense_counters {
    uint64_t matmuls_device, matmuls_cpu;
    uint64_t rows_device, rows_cpu;            /* token rows */
    uint64_t submissions, jobs, fallbacks;     /* jobs: one per slot (a chunk of output channels) */
    int64_t device_ns;                         /* busy (modelled on sim) */
    int64_t wall_ns;                           /* the calls that ran on the device, host steps included */
    int64_t modelled_ns;                       /* the same with the device's modelled busy time in place of
                                                  the host's simulation of it */
};
const struct dense_counters *executor_dense_counters(const struct moe_executor *e, enum moe_phase phase,
                                                             enum dense_kind kind);
/* Host time spent simulating the device past its modelled time in a phase,
 * experts and dense matmuls together: a wall time less this reads as the
 * modelled run's. 0 for devices with real clocks and on the CPU. */
int64_t moe_executor_simulation_ns(const struct moe_executor *e, enum moe_phase phase);
/* Resident dense bytes (the backbone), all or of one kind. */
uint64_t moe_executor_backbone_bytes(const struct moe_executor *e);
/* Whether the dense matmul whose weight is at `data` is resident on the
 * device (runs there from moe_executor_min_m rows); the M rule (0: no device). */
bool executor_dense_resident(const struct moe_executor *e, const void *data);
int moe_executor_min_m(const struct moe_executor *e);
uint64_t executor_dense_resident_bytes(const struct moe_executor *e, enum dense_kind kind);

/* Resident device bytes (slot pool and staging buffers), of them the
 * staging, and the slots: pinned, total. */
uint64_t moe_executor_resident_bytes(const struct moe_executor *e);
uint64_t moe_executor_staging_bytes(const struct moe_executor *e);
void moe_executor_slots(const struct moe_executor *e, int *pinned, int *total);
/* The device that prices the machine it models (the sim with board=1), whose
 * times the counters' modelled_ns then hold for every layer; NULL otherwise.
 * It is open even when nothing is resident on it. */
struct dev;
const struct dev *moe_executor_pricer(const struct moe_executor *e);
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
    int dense_packed;          /* dense matmuls (the backbone) packed at start */
    int64_t backbone_fill_ns;  /* their time, and the device's packing time in it (modelled on sim) */
    int64_t backbone_device_ns;
    int64_t fill_ns;           /* time filling the pinned experts' slots at start */
    int64_t fill_device_ns;    /* the device's packing and loading time in it (modelled on sim) */
};
const struct moe_pack_report *moe_executor_pack_report(const struct moe_executor *e);

/* The plan for a device of these capabilities with the options' budget and
 * routing statistics (moe_plan over moe_plan_load_stats): what a run and
 * `moex pack` place. -1 with moex_error() on a bad statistics file. */
int moe_plan_for_device(const struct moe_model_desc *d, const struct moe_exec_options *o, const struct dev_caps *caps,
                        struct moe_device_plan *out);
/* The same for the options' device, opened for its capabilities and closed
 * (for tests and reports: a run opens its device once and plans with
 * moe_plan_for_device). Device "" when nothing can be resident (the note
 * says why); -1 on a bad option or statistics file. */
int moe_device_plan(const struct moe_model_desc *d, const struct moe_exec_options *o, struct moe_device_plan *out);

/* "" or one line: why the device is not used, or the first device error. */
const char *moe_executor_note(const struct moe_executor *e);
/* "" without a device, else one line of what the budget holds: staging,
 * backbone, experts, pinned, the expected share of routed rows. */
const char *moe_executor_summary(const struct moe_executor *e);
/* The device's name, or "none". */
const char *moe_executor_device(const struct moe_executor *e);
/* The --profile table. */
void moe_executor_print(const struct moe_executor *e, FILE *out);

#endif
