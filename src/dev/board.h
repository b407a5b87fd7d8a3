/* The RK3588 board as a whole (sim figure board=1): its 4 A76 cores and the
 * LPDDR4X they share with the NPU, modelled from ../shared/NPU-FACTS.md
 * beside the NPU model of sim.h, so that a run predicts the board's time
 * for every op while the host still computes the logits. The figures live
 * with the sim's (sim_figures.c, each citing its line); the formulas here:
 *
 *   CPU matmul, m rows of a K x N weight of B bytes, T = cpu_threads:
 *     m = 1:  max(B / dram_gbps, K*N * cpu_gemv_ps / T)
 *     m > 1:  max(B / dram_gbps, m*K*N / (T * cpu_gemm_gmacs))
 *     (quant types differ by their bytes B only: NPU-FACTS.md gives no
 *     per-type CPU rates)
 *   CPU experts (the batched kernel): per expert with rows, its three
 *     matmuls at its rows + cpu_expert_us
 *   NPU: a job or batch priced by sim.h (mode, chain, single submits)
 *   attention: (keys + values) MACs over the context / (T * cpu_attn_gmacs)
 *   a layer's two sides, overlapped: max(CPU, NPU, bytes both read / dram_gbps);
 *     one after the other: their sum
 *
 * legacy=1 replays the earlier backend's expert policy on the run's
 * routing instead of the executor's decisions (no M rule, synchronous):
 *   hot = 0: every expert with rows goes to the NPU and is repacked per use
 *     (legacy_pack_ns per value + legacy_refill_us); single submissions also pay
 *     legacy_row_us per weight for each row after the first
 *   hot = N: the first N experts each layer touches stay resident (a
 *     first-touch load of load_ms); the others run on the CPU as one GEMV
 *     per row, each re-reading the int8 weights at gemv1_gbps
 * The time is deterministic: shapes and routing in, nanoseconds out. */
#ifndef MOEX_BOARD_H
#define MOEX_BOARD_H

#include "dev/sim.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stdint.h>

struct board;

struct board *board_new(const struct sim_figures *f); /* NULL when out of memory */
void board_free(struct board *b);
const struct sim_figures *board_figures(const struct board *b);

/* The CPU on m rows of a K x N weight of `type` (ns). */
double board_cpu_matmul_ns(const struct board *b, int m, int64_t K, int64_t N, enum qtype type);
/* The NPU on the same matmul as one job with its int8 weight resident
 * (ns); -1 outside its envelope (K or N off the tile multiples). */
double board_npu_matmul_ns(const struct board *b, int m, int64_t K, int64_t N);
/* Scores and weighted values of n tokens at positions n_past.. (ns). */
double board_attention_ns(const struct board *b, int n_tokens, int n_past, int n_head, int key_dim, int value_dim);

/* One MoE layer's experts (its router is a dense matmul, not counted here). */
struct board_moe_layer {
    int layer, n_layers;   /* among the file's MoE layers */
    int n_expert, n_embd, n_ff;
    enum qtype type[3];    /* gate, up, down */
    const int *rows;       /* (n_expert) routed rows of each expert */
    const bool *on_device; /* (n_expert) the executor's choice; NULL: all on the CPU */
    double device_ns;      /* the NPU side's modelled time (sim busy + pack + load) */
    bool overlap;          /* the two sides ran at the same time */
};
/* The layer's time on the board (ns), times moe_layers / n_layers when
 * moe_layers is set. With legacy=1 the rows are placed by the earlier
 * backend's policy (the hot sets persist across calls). */
double board_moe_ns(struct board *b, const struct board_moe_layer *L);

/* legacy: expert uses with rows on the NPU (hits) and on the CPU (misses). */
void board_legacy_uses(const struct board *b, uint64_t *hits, uint64_t *misses);

/* A model's forward pass as the board prices it: the dense matmuls of each
 * layer, split into the token mixer's and the FFN's, each layer's kind, the
 * attention shape and the lm head (model/board_net.h builds it from a
 * model). The experts are priced per layer (board_moe_ns). */
enum board_mixer { BOARD_ATTENTION = 0, BOARD_SHORTCONV, BOARD_DELTANET, BOARD_MIXERS };

struct board_matmul {
    int layer;     /* -1: the lm head */
    bool ffn;      /* of the layer's FFN (router, shared expert, dense FFN), else of its mixer */
    int64_t K, N;  /* N rows of K values */
    enum qtype type;
    const void *data;  /* the weight (which the executor may have made resident) */
    bool resident;     /* the executor placed it on the device: it runs there from device_min_m rows */
};

struct board_net {
    int n_layers;
    enum board_mixer *mixer; /* (n_layers) */
    bool *moe;               /* (n_layers) the FFN is routed experts */
    int n_head, key_dim, value_dim;
    struct board_matmul *mm; /* (n_mm) every dense matmul of the layers */
    int n_mm;
    struct board_matmul head;
    int device_min_m;        /* the executor's M rule for resident matmuls (0: none is resident) */
};

/* n tokens at positions n_past.. through every layer's dense matmuls and
 * attention and the lm head (all rows when all_logits, else the last), on
 * the board's CPU, or on its NPU where the executor placed the matmul
 * (resident, rows >= device_min_m) and the NPU is the faster, as the
 * executor's cost rule decides;
 * each layer's ops times its kind's count in the predicted model (ns). */
double board_net_ns(const struct board *b, const struct board_net *n, int n_tokens, int n_past, bool all_logits);

#endif
