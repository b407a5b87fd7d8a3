/* The sim's figures: the rk3588 preset (each figure's source in a comment)
 * and the "key=value,..." parser that overrides any of them. */
#include "dev/sim.h"

#include "core/error.h"

#ifndef MOEX_SIM_GUARD_DEFAULT
#define MOEX_SIM_GUARD_DEFAULT 0
#endif

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct figure {
    const char *key;
    size_t offset;
    double rk3588;
    double max; /* values are >= 0 and <= max */
    const char *what;
};

#define FIG(k, v, mx, w) {#k, offsetof(struct sim_figures, k), v, mx, w}

/* Fitted to NPU-FACTS.md's M = 1 table: single submits to 34 + 69 per
 * 1024-wide K slice + weight bytes at 9.92 GB/s; chains to 80 us per
 * submission + 63.6 us per job + weight bytes at 12.5 GB/s per core (the
 * 8-expert chains then cost 168/168/404 us per expert against 165/172/404,
 * the streams 63/63/141 against 67/54/152). The table is at M = 1, where
 * compute hardly shows: 100 GMAC/s per core (a sixth of the 6 TOPS peak) is
 * an assumption. Pack, create and destroy: see the per-figure notes. */
static const struct figure figures[] = {
    FIG(single_us, 34, 1e7, "fixed cost of a one-job submission (us)"),
    FIG(kslice_us, 69, 1e7, "single submit: cost per K slice (us)"),
    FIG(kslice, 1024, 1 << 20, "K slice width"),
    FIG(single_gbps, 9.92, 1e4, "single submit: weight streaming (GB/s)"),
    FIG(submit_us, 80, 1e7, "fixed cost of a chained or streamed submission (us)"),
    FIG(job_us, 63.6, 1e7, "chain/stream: cost per job (us)"),
    FIG(core_gbps, 12.5, 1e4, "chain/stream: weight streaming per core (GB/s)"),
    FIG(core_gmacs, 100, 1e6, "int8 multiply-accumulates per core (G/s)"),
    FIG(cores, 3, 64, "NPU cores"),
    FIG(chain_k_multiple, 512, 1 << 20, "chain/stream: K must be a multiple of this"),
    FIG(chain_k_max, 4096, 1 << 20, "chain/stream: K must be at most this"),
    FIG(mode, SIM_STREAM, 3, "several jobs run as 0 single submits, 1 a chain, 2 a stream, 3 the rknpu device's programs"),
    /* programs: a 2048 x 512 expert is two tasks (K slices of 1024); at the
     * chain's 63.6 us per such job, 31.8 us a task */
    FIG(task_us, 31.8, 1e7, "programs: cost per task (one K slice x N slice x M tile)"),
    FIG(scratch_mib, 16, 4096, "programs: the rknpu device's scratch per window (MiB), which bounds a submit"),
    /* "+ 8 experts chained per submit": chain=8 */
    FIG(chain, 0, 1 << 20, "jobs per chained or streamed submission at most (0: the whole batch)"),
    /* "DMA buffer fill, cacheable mapping + clean before submit ~10 GB/s" */
    FIG(fill_gbps, 10, 1e4, "activations in and outputs out (GB/s)"),
    /* "repack in place, Qwen / LFM expert: 3.1 ms / 11 ms" (gate + up +
     * down: 4.7 M / 11.0 M values): 3.7 / 8.7 ms, +20% / -21% */
    FIG(pack_ns_per_value, 0.79, 1e6, "packing a weight on the host (ns per value)"),
    /* Inferred from "create/destroy during eviction churn: 13-28 ms per
     * expert at a 25-30% hit rate" (3 weights of 1.5 MiB per expert, each
     * miss a destroy + create + pack + single submit): ~20 ms. */
    FIG(create_us, 300, 1e8, "buffer creation: fixed cost (us)"),
    FIG(create_us_per_mib, 3000, 1e8, "buffer creation: cost per MiB (us)"),
    FIG(destroy_us, 200, 1e8, "buffer destruction: fixed cost (us)"),
    FIG(destroy_us_per_mib, 1700, 1e8, "buffer destruction: cost per MiB (us)"),
    /* "a 32-bit IOMMU: a 4 GiB IOVA window" */
    FIG(iova_mib, 4096, 1 << 24, "device address window (MiB)"),
    FIG(iova_align, 4096, 1 << 30, "buffer alignment and granule (bytes, a power of two)"),
    /* "LRU with free + re-pack failed sooner ... freed IOVA ranges were not reused" */
    FIG(iova_reuse, 0, 1, "1: destroyed buffers' ranges are allocated again; 0: never (as measured)"),
    FIG(max_buffers, 0, 1e9, "live buffers at most (0: no limit)"),
    /* "the RK3588 vendor driver can give a process more than one 4 GiB domain" */
    FIG(domains, 1, 64, "IOMMU domains, each a window of iova_mib"),
    /* int8 matmuls take K in 32s and N in 16s */
    FIG(k_multiple, 32, 1 << 20, "envelope: K multiple"),
    FIG(n_multiple, 16, 1 << 20, "envelope: N multiple"),
    /* "good at int8 GEMM, M >= 8" */
    FIG(min_m, 8, 1 << 20, "rows from which the device beats the CPU"),
    FIG(fail_alloc, 0, 1e18, "fail the Nth buffer creation (0: never)"),
    FIG(fail_submit, 0, 1e18, "fail the Nth submission (0: never)"),
    FIG(fail_seed, 0, 1e18, "seed of random faults"),
    FIG(fail_prob, 0, 1, "probability that a creation or submission fails"),
    /* A device the host cannot address: the test build turns it on everywhere. */
    FIG(guard, MOEX_SIM_GUARD_DEFAULT, 1, "1: the device's memory faults when touched outside its calls"),
    /* The board around the NPU (dev/board.h has the formulas). Figures
     * marked "fitted" are not in NPU-FACTS.md's tables: each is solved from
     * the end-to-end rows it names, which then check only the others. */
    FIG(board, 0, 1, "1: model the board's CPU and DRAM too (a whole-board prediction)"),
    /* "End-to-end results (4 CPU threads)"; "4x A76 at 2.4 GHz" */
    FIG(cpu_threads, 4, 64, "board: CPU threads"),
    /* "CPU NEON, 1 thread": 73 us for 2048 x 512 (70 ps a weight), 263 us for 2048 x 1792 (72 ps) */
    FIG(cpu_gemv_ps, 71, 1e6, "board: one row (M = 1) on one thread, per weight (ps)"),
    /* fitted: CPU-only pp128 22.59 (Qwen3-35B-A3B) and pp64 36.2 (LFM2-8B-A1B), with cpu_expert_us */
    FIG(cpu_gemm_gmacs, 13.3, 1e6, "board: M > 1 rows, multiply-accumulates per thread (G/s)"),
    FIG(cpu_expert_us, 90, 1e7, "board: CPU cost per expert with rows per layer (us)"),
    /* fitted: the two CPU-only decodes together, Qwen3-35B-A3B ~6.3 (384
     * expert uses a token) and LFM2-8B-A1B tg64 19.09 (88): no bandwidth
     * alone fits both; 75 us more per one-row expert (its rows' first
     * touches, the pool's wake-up) puts them at +14% and -15% */
    FIG(cpu_expert_decode_us, 75, 1e7, "board: more per expert with one row (us)"),
    /* an assumption: f32 lanes are a quarter of int8 dot-product lanes */
    FIG(cpu_attn_gmacs, 3.3, 1e6, "board: attention scores and values, f32 MACs per thread (G/s)"),
    /* fitted: LFM2-8B-A1B CPU-only tg64 19.09 ("LPDDR4X at 2112 MHz": 33.8 GB/s peak) */
    FIG(dram_gbps, 21.3, 1e4, "board: DRAM read bandwidth, CPU and NPU together (GB/s)"),
    /* "experts on NPU, one submit per expert" / "4 hot experts per layer resident": the
     * earlier backend's policy, no M rule, replayed on the run's routing */
    FIG(legacy, 0, 1, "board: 1: experts placed as the earlier backend did (see hot)"),
    /* fitted: "+ 8 experts chained per submit" pp128 0.97 (every touched expert repacked, before
     * "+ SIMD repack" 2.90); the decode row 0.11 then follows. "+ SIMD repack" is 1.34 (the
     * older live path's "3.7-4.7 ms" an expert), "+ fused" 0.99 ("repack in place 3.1 ms") */
    FIG(legacy_pack_ns, 6.6, 1e6, "board, legacy: repacking a weight per use (ns per value)"),
    /* fitted: "+ SIMD repack" pp128 2.90; "+ fused Q4_K -> int8 pack" 3.13 then follows */
    FIG(legacy_refill_us, 3000, 1e8, "board, legacy: refilling an expert's slots besides the repack (us)"),
    /* fitted: "one submit per expert" pp128 0.28; the M = 1 table has no such term, and decode
     * (0.11, one row) needs none */
    FIG(legacy_row_us, 2450, 1e8, "board, legacy: single submission, cost per weight of each row after the first (us)"),
    /* "4 hot experts per layer resident (16.8% hit rate), cold on CPU" */
    FIG(hot, 0, 1 << 20, "board, legacy: hot experts per layer, resident from first touch; 0: all repacked"),
    /* "load one expert from a persisted pack file (rebuilds the chain layout) 5.9 ms" */
    FIG(load_ms, 5.9, 1e6, "board, legacy: first-touch load of a hot expert (ms)"),
    /* fitted: LFM2-8B-A1B hot-4 tg64 6.56: "cold experts run as one GEMV each re-reading ~3.67 MB
     * from DRAM per token" (int8 bytes; the 1-thread table's 263 us is 14 GB/s warm) */
    FIG(gemv1_gbps, 8.5, 1e4, "board, legacy: a cold expert's GEMV per row, one thread from DRAM (GB/s)"),
    /* The shape predicted for: a cut-down file's layers of each kind stand for this many. */
    FIG(attn_layers, 0, 1 << 20, "board: attention layers predicted for (0: the file's)"),
    FIG(conv_layers, 0, 1 << 20, "board: short-convolution layers predicted for (0: the file's)"),
    FIG(delta_layers, 0, 1 << 20, "board: delta-net layers predicted for (0: the file's)"),
    FIG(dense_layers, 0, 1 << 20, "board: dense-FFN layers predicted for (0: the file's)"),
    FIG(moe_layers, 0, 1 << 20, "board: MoE layers predicted for (0: the file's)"),
    FIG(vocab, 0, 1 << 26, "board: vocabulary of the lm head predicted for (0: the file's)"),
};

enum { N_FIGURES = sizeof figures / sizeof figures[0] };

static double *slot_of(struct sim_figures *f, const struct figure *g) {
    return (double *)(void *)((char *)f + g->offset);
}

static void preset_rk3588(struct sim_figures *f) {
    for (int i = 0; i < N_FIGURES; i++) *slot_of(f, &figures[i]) = figures[i].rk3588;
}

static int set_one(struct sim_figures *f, const char *item, size_t len) {
    char buf[128];
    if (len >= sizeof buf) return moex_errorf("sim: figure '%.40s...' is too long", item);
    memcpy(buf, item, len);
    buf[len] = 0;
    char *eq = strchr(buf, '=');
    if (!eq) {
        if (!strcmp(buf, "rk3588")) return 0; /* the preset, already applied */
        return moex_errorf("sim: unknown preset '%s' (expected rk3588 or key=value)", buf);
    }
    *eq = 0;
    const char *key = buf, *val = eq + 1;
    for (int i = 0; i < N_FIGURES; i++) {
        const struct figure *g = &figures[i];
        if (strcmp(key, g->key)) continue;
        if (!strcmp(key, "mode")) {
            if (!strcmp(val, "single")) val = "0";
            else if (!strcmp(val, "chain")) val = "1";
            else if (!strcmp(val, "stream")) val = "2";
            else if (!strcmp(val, "programs")) val = "3";
        }
        char *end;
        errno = 0;
        double v = *val ? strtod(val, &end) : -1;
        if (!*val || *end || errno || !isfinite(v) || v < 0 || v > g->max)
            return moex_errorf("sim: %s=%s: expected a number in 0..%g", key, val, g->max);
        *slot_of(f, g) = v;
        return 0;
    }
    return moex_errorf("sim: unknown figure '%s' (see moex probe --sim-help)", key);
}

int sim_figures_parse(const char *spec, struct sim_figures *f) {
    preset_rk3588(f);
    if (!spec || !*spec) return 0;
    const char *p = spec;
    bool first = true;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) return moex_errorf("sim: empty item in '%s'", spec);
        /* a preset name is only valid first */
        if (!first && !memchr(p, '=', len)) return moex_errorf("sim: '%.*s' is not key=value", (int)len, p);
        if (set_one(f, p, len) != 0) return -1;
        first = false;
        if (!comma) break;
        p = comma + 1;
    }
    uint64_t align = (uint64_t)f->iova_align;
    if ((double)align != f->iova_align || align == 0 || (align & (align - 1)))
        return moex_errorf("sim: iova_align=%g is not a power of two", f->iova_align);
    if (f->cores < 1 || f->kslice < 1 || f->single_gbps <= 0 || f->core_gbps <= 0 || f->core_gmacs <= 0 ||
        f->fill_gbps <= 0 || f->k_multiple < 1 || f->n_multiple < 1 || f->chain_k_multiple < 1 || f->min_m < 1 ||
        f->iova_mib * 1048576.0 < f->iova_align || f->domains < 1 || f->domains != floor(f->domains))
        return moex_errorf("sim: a rate, count or size figure is zero");
    if (f->board && (f->cpu_threads < 1 || f->cpu_gemv_ps <= 0 || f->cpu_gemm_gmacs <= 0 || f->cpu_attn_gmacs <= 0 ||
                     f->dram_gbps <= 0 || f->gemv1_gbps <= 0))
        return moex_errorf("sim: a board rate or thread count is zero");
    return 0;
}

const char *sim_figures_help(void) {
    static char text[8192];
    if (text[0]) return text;
    size_t at = 0;
    for (int i = 0; i < N_FIGURES && at < sizeof text; i++)
        at += (size_t)snprintf(text + at, sizeof text - at, "  %-20s %-8g %s\n", figures[i].key, figures[i].rk3588,
                               figures[i].what);
    return text;
}
