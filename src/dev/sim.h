/* The model behind the `sim` device: an RK3588-class NPU as measured
 * (../shared/NPU-FACTS.md). Time runs on a virtual clock advanced by a cost
 * model; device memory is a first-fit 32-bit IOVA window; faults are
 * injected on request. Results are computed exactly elsewhere (the cpu
 * kernel): this module only says how long things take and what fails.
 *
 * Submission cost (M rows, K x N int8 weight of W = K*N bytes, M*K*N MACs,
 * F = the DMA fill of M*K activation bytes and M*N*4 output bytes):
 *   single (one job):   single_us + kslice_us * ceil(K / kslice)
 *                       + W / single_gbps + MACs / (cores * core_gmacs) + F
 *   chain (one core):   submit_us + sum over jobs of
 *                       (job_us + W / core_gbps + MACs / core_gmacs) + F
 *   stream (cores):     as chain, with the jobs' sum divided by `cores`
 * Chains and streams take only K % chain_k_multiple == 0 and K <= chain_k_max;
 * other jobs run as single submits. The rk3588 preset fits the measured
 * M = 1 table within 25% for every entry (tests/test_dev_sim.c).
 *
 * Memory: one 32-bit window per IOMMU domain (domains=N: the vendor driver
 * can give a process several), each buffer in the window that fits it most
 * tightly. Buffers are created and destroyed on the NPU's one stream, so
 * their cost (create_us + create_us_per_mib * MiB, likewise destroy) adds
 * to the clock. With iova_reuse=0 (the preset) a destroyed buffer's range
 * is never handed out again: on the board, LRU churn with free + re-create
 * exhausted the window with half as many weights resident as keeping every
 * expert did, while a fixed pool never failed. */
#ifndef MOEX_SIM_H
#define MOEX_SIM_H

#include <stdint.h>

/* Every figure is a double so that one "key=value" parser sets any of them. */
struct sim_figures {
    /* single submits */
    double single_us, kslice_us, kslice, single_gbps;
    /* chained and streamed submits */
    double submit_us, job_us, core_gbps, core_gmacs, cores;
    double task_us, scratch_mib; /* mode=programs: per task; the scratch that bounds a submit */
    double chain_k_multiple, chain_k_max;
    double mode; /* how dev_submit runs several jobs: 0 single, 1 chain, 2 stream */
    double chain; /* jobs one chained or streamed submission takes at most (0: all of the batch) */
    /* host side */
    double fill_gbps, pack_ns_per_value;
    double create_us, create_us_per_mib, destroy_us, destroy_us_per_mib;
    /* memory */
    double iova_mib, iova_align, iova_reuse, max_buffers; /* max_buffers 0: no limit */
    double domains; /* IOMMU domains, a window of iova_mib each */
    /* envelope */
    double k_multiple, n_multiple, min_m;
    /* faults: fail the Nth buffer creation / submission (1-based, 0 never),
     * and every one with probability fail_prob from fail_seed */
    double fail_alloc, fail_submit, fail_seed, fail_prob;
    /* 1: the device's memory is PROT_NONE outside its own calls */
    double guard;
    /* board=1: the board around the NPU is modelled too (dev/board.h) */
    double board;
    double cpu_threads, cpu_gemv_ps, cpu_gemm_gmacs, cpu_expert_us, cpu_attn_gmacs, dram_gbps;
    double cpu_expert_decode_us; /* more per expert at one row: decode (fitted to the two CPU decodes) */
    /* the earlier backend's policies, replayed on this run's routing */
    double legacy, legacy_pack_ns, legacy_refill_us, legacy_row_us, hot, load_ms, gemv1_gbps;
    /* the model the prediction is for, when the file is a cut-down copy (0: as the file) */
    double attn_layers, conv_layers, delta_layers, dense_layers, moe_layers, vocab;
};

/* SIM_PROGRAMS: the rknpu device's own programs (rknpu_gen.h) priced task
 * by task: the submits and tasks the generator emits for the batch. */
enum sim_mode { SIM_SINGLE = 0, SIM_CHAIN = 1, SIM_STREAM = 2, SIM_PROGRAMS = 3 };

/* "rk3588" or "rk3588,key=value,..." or "key=value,..." (the preset is
 * rk3588); mode also takes single|chain|stream. 0, or -1 with moex_error. */
int sim_figures_parse(const char *spec, struct sim_figures *f);
/* The keys, one "key default  description" line each. */
const char *sim_figures_help(void);

struct sim;

struct sim *sim_new(const struct sim_figures *f); /* NULL when out of memory */
void sim_delete(struct sim *s);
const struct sim_figures *sim_get_figures(const struct sim *s);

uint64_t sim_clock_ns(const struct sim *s);
void sim_advance(struct sim *s, double ns);

/* Device buffers in the window. DEV_OK, or DEV_E_DEVMEM (window exhausted,
 * too many buffers, injected) with moex_error. */
int sim_buffer_create(struct sim *s, uint64_t bytes, uint64_t *addr);
int sim_buffer_destroy(struct sim *s, uint64_t addr); /* DEV_E_ARG when unknown */
uint64_t sim_window_used(const struct sim *s);  /* all windows */
uint64_t sim_buffer_count(const struct sim *s);
/* Several IOMMU domains (domains=N): a buffer lies in the window whose
 * largest free range fits it most tightly (the first of equals), so that
 * big ranges stay whole for big buffers; its address names the window. */
int sim_domains(const struct sim *s);
uint64_t sim_domain_used(const struct sim *s, int domain);
uint64_t sim_domain_buffers(const struct sim *s, int domain);
int sim_address_domain(uint64_t addr);
uint64_t sim_largest_free(const struct sim *s); /* the largest free range of any window */
/* The largest free range of the fullest window that has one of at least
 * `bytes` (0: none): where a piece fills a window's tail. */
uint64_t sim_tightest_free(const struct sim *s, uint64_t bytes);

struct sim_shape {
    int m, k, n;
    int buffer;   /* the device buffer holding the weight (SIM_PROGRAMS: one chain per buffer) */
};

/* One submission of these jobs in a mode (ns); -1 when the mode refuses
 * them (single takes one job; chain and stream need chainable K). */
double sim_submission_ns(const struct sim *s, enum sim_mode mode, const struct sim_shape *jobs, int n);
/* How dev_submit runs a batch: the chainable jobs as submissions of the
 * preset's mode of at most `chain` jobs each (one for all when chain is 0;
 * single when there is one job), the others one single submission each.
 * Total ns. */
double sim_batch_ns(const struct sim *s, const struct sim_shape *jobs, int n);
/* A batch on the clock: DEV_OK and *ns, or DEV_E_SUBMIT when a fault is
 * injected (the clock still pays the submission floor). */
int sim_submit(struct sim *s, const struct sim_shape *jobs, int n, double *ns);
/* SIM_PROGRAMS: the submits and tasks priced so far (the generator's counts
 * for the same batches: rknpu_batch_cost). */
void sim_program_counts(const struct sim *s, uint64_t *submits, uint64_t *tasks);

double sim_pack_ns(const struct sim *s, int K, int N);
double sim_fill_ns(const struct sim *s, uint64_t bytes);
double sim_create_ns(const struct sim *s, uint64_t bytes);
double sim_destroy_ns(const struct sim *s, uint64_t bytes);

#endif
