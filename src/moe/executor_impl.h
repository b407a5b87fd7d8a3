/* Internal to src/moe: the executor's state, shared by its parts, whose
 * calls go one way: executor.c (set-up) -> plan.c (pure) -> residency.c
 * (slots, pack file, cache) <- executor_run.c (experts per batch) and
 * executor_dense.c (dense matmuls), which call residency and the device,
 * never each other's set-up; executor_report.c prints. */
#ifndef MOEX_EXECUTOR_IMPL_H
#define MOEX_EXECUTOR_IMPL_H

#include "dev/dev.h"
#include "moe/executor.h"
#include "moe/moe_layers.h"
#include "moe/plan.h"

#include <stdio.h>

/* Lanes of the timeline. */
enum { LANE_CPU = 0, LANE_DEVICE = 1 };

/* The dense matmuls' placement and counters (executor_dense.c). */
struct dense_entry {
    const struct matrix *w;
    int id;                       /* index into desc.dense */
};
struct dense_exec {
    int n;                        /* desc.n_dense */
    int *slot;                    /* (n) first device slot of a resident dense matmul, or -1 */
    int *chunks, *chunk_rows;     /* (n) its slots, output channels per slot (the last may hold fewer) */
    struct dense_entry *by_w;     /* (n) sorted by matrix, for lookups */
    struct dev_job *jobs;         /* (max_jobs) one call's jobs */
    int max_jobs;
    uint64_t resident[DENSE_KINDS], backbone_bytes;
    struct dense_counters counters[MOE_PHASES][DENSE_KINDS];
};

/* One layer's device work, run by the device's stream (host steps included). */
struct device_work {
    struct moe_executor *e;
    int layer;
    struct moe_scratch *s;
    const float *x;
    int64_t t_submit; /* when the stream's last host step ended: a submission runs from then on */
};

struct moe_executor {
    struct moe_model_desc desc;
    struct threadpool *pool;
    int n_layers, n_expert, n_ff, n_embd, top_k, max_pairs;
    struct dev *dev;                 /* NULL: everything on the CPU */
    const struct dev_caps *caps;
    int min_m;
    bool overlap, failed;
    char note[1024];
    char summary[1024];              /* what the budget holds (moe_executor_summary) */
    struct placement plan;
    struct expert_cache *cache;
    uint64_t *expert_gguf_bytes;     /* (n_layers) an expert's three matrices as stored in the GGUF */
    double cpu_ns_per_row;           /* the CPU's time per routed row that admission weighs */
    bool adaptive;                   /* cpu_ns_per_row follows this run's measured times */
    double pack_ns;                  /* packing one expert, from the device's cost model */
    /* Host copies of the staged rows, (stage rows, ...) in stage order:
     * int8 codes and a scale per row, or on a block device floats (the
     * codes arrays then hold them, the scales are unused). */
    struct stage_layout stage;
    int stage_buf[N_STAGE_BUFS];             /* the device's staging buffers */
    int *stage_row;                          /* (n_expert) first stage row of a device expert */
    int8_t *act_codes; float *act_scales;   /* (rows, n_embd) */
    float *gate_up;                          /* (rows, 2 * n_ff): gate rows, then up rows */
    int8_t *h_codes; float *h_scales;        /* (rows, n_ff) */
    struct dev_job *jobs;                    /* (2 * n_expert) */
    bool *on_cpu;                            /* (n_expert) this batch */
    int *dev_slot;                           /* (n_expert) expert slot this batch, or -1 */
    bool *busy;                              /* (expert slots) used by this batch */
    int *to_pack;                            /* (n_expert) experts admitted this batch */
    int n_to_pack;
    struct moe_phase_counters counters[MOE_PHASES];
    enum moe_phase phase;
    struct trace *trace;
    struct device_work work;         /* the layer the device's stream runs */
    /* The pack file experts are loaded from instead of packed; a file found
     * damaged while running is not used again (pack_refused). */
    struct packfile *pack;
    char *pack_path;                 /* copy of the option, for the report */
    bool pack_refused;
    bool running;                    /* start-up is over: moe_executor_run has been called */
    struct moe_pack_report pack_report;
    struct dense_exec dense;         /* the dense matmuls (executor_dense.c) */
    /* A device that prices the machine it models (the sim's board): each
     * layer's modelled time is its price of the placement (dev_caps.pricing) */
    struct dev *pricer;
    int *priced_rows;                /* (n_expert) */
    bool *priced_on_device;          /* (n_expert) */
};

/* The first note of a run (fmt with one %s). */
static inline void exec_note(struct moe_executor *e, const char *fmt, const char *detail) {
    if (!e->note[0]) snprintf(e->note, sizeof e->note, fmt, detail);
}

/* ---- run (executor_run.c) */
/* Queues jobs in submissions of at most the device's max_jobs, counting them. */
int exec_submit(struct moe_executor *e, const struct dev_job *jobs, int n, dev_fence *fence, uint64_t *submissions,
                uint64_t *n_jobs);

/* ---- residency (residency.c) */
/* Staging buffers and the slot pool of the plan on the opened device (its
 * budget set), the pinned experts filled, the backbone packed. 0 also when
 * the device could not take them (e->dev is then NULL and the note says
 * why); -1 with moex_error() when out of memory. */
int res_start(struct moe_executor *e, const struct moe_exec_options *o, const struct moe_device_plan *plan);
/* Whether the pack file holds the expert (and is still trusted). */
bool res_file_has(const struct moe_executor *e, int layer, int expert);
/* An expert into its slots: from the pack file when it holds the expert,
 * else packed live; *loaded says which. */
int res_fill_expert(struct moe_executor *e, int layer, int expert, int slot, bool *loaded);
/* The backbone into the device's slots from first_slot on: matmul i of the
 * description at slot_of[i] (relative, -1: stays on the CPU), packed now. */
int res_pack_backbone(struct moe_executor *e, const int32_t *slot_of, int first_slot);

/* ---- dense matmuls (executor_dense.c) */
/* The lookup table and counters, device or not; -1 when out of memory. */
int dense_exec_init(struct moe_executor *e);
void dense_exec_free(struct dense_exec *x);
void dense_exec_print(const struct moe_executor *e, FILE *out);

static inline struct dev_ref exec_at(const struct moe_executor *e, int buf, uint64_t offset) {
    return (struct dev_ref){ e->stage_buf[buf], offset };
}

/* A block device (weights as GGUF rows, activations staged as floats). */
static inline bool exec_blocks(const struct moe_executor *e) {
    return e->caps && e->caps->compute == DEV_COMPUTE_BLOCKS;
}

/* Staged inputs (BUF_ACT, BUF_H) of K values a row: where row r starts,
 * and where its scale (W8A8) or its q8 scratch (block devices) starts. */
static inline struct dev_ref exec_row(const struct moe_executor *e, int buf, uint64_t r, int64_t K) {
    return exec_at(e, buf, r * (uint64_t)K * (exec_blocks(e) ? sizeof(float) : 1));
}
static inline struct dev_ref exec_row_scale(const struct moe_executor *e, int buf, uint64_t r, int64_t K) {
    return exec_at(e, buf, e->stage.scale_offset[buf] + (exec_blocks(e) ? dev_act_q8_bytes((int)r, (int)K) : r * sizeof(float)));
}

/* Row r of K values into the host copy of a staged input: quantized
 * (W8A8), or as it is. DEV_E_VALUE on non-finite values (W8A8). */
int exec_put_row(const struct moe_executor *e, const float *x, int64_t K, int r, int8_t *codes, float *scales);
/* The first `rows` rows of a host copy into staging buffer buf. */
int exec_write_rows(struct moe_executor *e, int buf, const int8_t *codes, const float *scales, int rows, int64_t K);

#endif
