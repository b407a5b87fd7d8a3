/* The board model's formulas (board.h); its figures are sim_figures.c's. */
#include "dev/board.h"

#include <stdlib.h>
#include <string.h>

enum { MATS = 3 }; /* gate, up, down */

struct board {
    struct sim_figures f;
    struct sim *npu;       /* prices submissions; holds no memory */
    /* legacy: each layer's resident hot set, filled in first-touch order */
    int hot_layers, hot_cap;
    int32_t *hot;          /* (hot_layers, hot_cap) expert ids */
    int *n_hot;            /* (hot_layers) */
    struct sim_shape *jobs; /* (MATS * n_expert) one layer's NPU jobs: gate and up, then down */
    int jobs_cap;
    uint64_t hits, misses;
};

struct board *board_new(const struct sim_figures *f) {
    struct board *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->f = *f;
    /* The NPU's prices only: a window of one granule, so no memory is reserved. */
    struct sim_figures nf = *f;
    nf.domains = 1;
    nf.iova_mib = nf.iova_align / 1048576.0;
    if (!(b->npu = sim_new(&nf))) {
        free(b);
        return NULL;
    }
    return b;
}

void board_free(struct board *b) {
    if (!b) return;
    sim_delete(b->npu);
    free(b->hot);
    free(b->n_hot);
    free(b->jobs);
    free(b);
}

const struct sim_figures *board_figures(const struct board *b) { return &b->f; }

static double max2(double a, double b) { return a > b ? a : b; }

static double weight_bytes(int64_t K, int64_t N, enum qtype type) {
    size_t row = quant_row_size(type, K);
    return (double)N * (double)(row ? row : (size_t)K * 2);
}

double board_cpu_matmul_ns(const struct board *b, int m, int64_t K, int64_t N, enum qtype type) {
    const struct sim_figures *f = &b->f;
    double values = (double)K * (double)N;
    double compute = m <= 1 ? values * f->cpu_gemv_ps * 1e-3 / f->cpu_threads
                            : (double)m * values / (f->cpu_threads * f->cpu_gemm_gmacs);
    return max2(weight_bytes(K, N, type) / f->dram_gbps, compute);
}

double board_npu_matmul_ns(const struct board *b, int m, int64_t K, int64_t N) {
    if (K % (int64_t)b->f.k_multiple || N % (int64_t)b->f.n_multiple || K > (1 << 20) || N > (1 << 24)) return -1;
    struct sim_shape job = { m, (int)K, (int)N, 0 };
    return sim_batch_ns(b->npu, &job, 1);
}

double board_attention_ns(const struct board *b, int n_tokens, int n_past, int n_head, int key_dim, int value_dim) {
    /* token i attends over n_past + i + 1 positions */
    double positions = (double)n_tokens * n_past + (double)n_tokens * (n_tokens + 1) / 2.0;
    double macs = positions * n_head * (double)(key_dim + value_dim);
    return macs / (b->f.cpu_threads * b->f.cpu_attn_gmacs);
}

/* The batched CPU kernel on one expert's rows (ns). */
static double cpu_expert_ns(const struct board *b, const struct board_moe_layer *L, int rows) {
    return board_cpu_matmul_ns(b, rows, L->n_embd, L->n_ff, L->type[0]) +
           board_cpu_matmul_ns(b, rows, L->n_embd, L->n_ff, L->type[1]) +
           board_cpu_matmul_ns(b, rows, L->n_ff, L->n_embd, L->type[2]) + 1e3 * b->f.cpu_expert_us +
           (rows == 1 ? 1e3 * b->f.cpu_expert_decode_us : 0);
}

static double expert_gguf_bytes(const struct board_moe_layer *L) {
    return weight_bytes(L->n_embd, L->n_ff, L->type[0]) + weight_bytes(L->n_embd, L->n_ff, L->type[1]) +
           weight_bytes(L->n_ff, L->n_embd, L->type[2]);
}

/* moex: the executor's placement, the NPU side as the sim priced it. */
static double moex_layer_ns(const struct board *b, const struct board_moe_layer *L) {
    double cpu = 0, cpu_bytes = 0, npu_bytes = 0;
    bool any_device = false;
    for (int e = 0; e < L->n_expert; e++) {
        int rows = L->rows[e];
        if (!rows) continue;
        if (L->on_device && L->on_device[e]) {
            any_device = true;
            npu_bytes += MATS * (double)L->n_embd * L->n_ff; /* int8 weights streamed */
            continue;
        }
        cpu += cpu_expert_ns(b, L, rows);
        cpu_bytes += expert_gguf_bytes(L);
    }
    if (!any_device) return cpu;
    if (!L->overlap) return cpu + L->device_ns;
    return max2(max2(cpu, L->device_ns), (cpu_bytes + npu_bytes) / b->f.dram_gbps);
}

static int hot_slot(struct board *b, const struct board_moe_layer *L, int expert, bool *first_touch) {
    int32_t *set = &b->hot[(size_t)L->layer * b->hot_cap];
    int *n = &b->n_hot[L->layer];
    *first_touch = false;
    for (int i = 0; i < *n; i++)
        if (set[i] == expert) return i;
    if (*n == b->hot_cap) return -1;
    *first_touch = true;
    set[*n] = expert;
    return (*n)++;
}

static int legacy_state(struct board *b, const struct board_moe_layer *L) {
    int cap = (int)b->f.hot;
    if (b->jobs_cap < MATS * L->n_expert) {
        struct sim_shape *j = realloc(b->jobs, sizeof *j * (size_t)(MATS * L->n_expert));
        if (!j) return -1;
        b->jobs = j;
        b->jobs_cap = MATS * L->n_expert;
    }
    if (cap < 1 || (b->hot && b->hot_layers == L->n_layers)) return 0;
    free(b->hot);
    free(b->n_hot);
    b->hot = calloc((size_t)L->n_layers * (size_t)cap, sizeof *b->hot);
    b->n_hot = calloc((size_t)L->n_layers, sizeof *b->n_hot);
    if (!b->hot || !b->n_hot) return -1;
    b->hot_layers = L->n_layers;
    b->hot_cap = cap;
    return 0;
}

/* The earlier backend: no M rule, everything one after the other. */
static double legacy_layer_ns(struct board *b, const struct board_moe_layer *L) {
    const struct sim_figures *f = &b->f;
    if (legacy_state(b, L) != 0 || L->layer < 0 || L->layer >= L->n_layers) return moex_layer_ns(b, L);
    double values = (double)L->n_embd * L->n_ff; /* one weight */
    double cpu = 0, npu = 0;
    int n_gate_up = 0, n_down = 0;
    struct sim_shape *gate_up = b->jobs, *down = b->jobs + 2 * L->n_expert;
    for (int e = 0; e < L->n_expert; e++) {
        int rows = L->rows[e];
        if (!rows) continue;
        if (f->hot >= 1) {
            bool first_touch;
            if (hot_slot(b, L, e, &first_touch) < 0) {
                /* one GEMV per row, each re-reading the int8 weights */
                cpu += rows * MATS * values / f->gemv1_gbps;
                b->misses++;
                continue;
            }
            if (first_touch) npu += 1e6 * f->load_ms;
        } else {
            npu += f->legacy_pack_ns * MATS * values + 1e3 * f->legacy_refill_us;
        }
        b->hits++;
        if ((int)f->mode == SIM_SINGLE) npu += 1e3 * f->legacy_row_us * (rows - 1) * MATS;
        gate_up[n_gate_up++] = (struct sim_shape){ rows, L->n_embd, L->n_ff, 0 };
        gate_up[n_gate_up++] = (struct sim_shape){ rows, L->n_embd, L->n_ff, 0 };
        down[n_down++] = (struct sim_shape){ rows, L->n_ff, L->n_embd, 0 };
    }
    npu += sim_batch_ns(b->npu, gate_up, n_gate_up) + sim_batch_ns(b->npu, down, n_down);
    return cpu + npu;
}

double board_moe_ns(struct board *b, const struct board_moe_layer *L) {
    double ns = b->f.legacy ? legacy_layer_ns(b, L) : moex_layer_ns(b, L);
    if (b->f.moe_layers >= 1 && L->n_layers > 0) ns *= b->f.moe_layers / L->n_layers;
    return ns;
}

void board_legacy_uses(const struct board *b, uint64_t *hits, uint64_t *misses) {
    *hits = b->hits;
    *misses = b->misses;
}
