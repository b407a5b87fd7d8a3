/* The program generator (rknpu_gen.h). One function per block, in program
 * order; every value goes through the register table's fields, so a value
 * that would wrap its field is refused by name instead of emitted. */
#include "dev/rknpu_gen.h"

#include "core/error.h"

#include <string.h>

int rknpu_rows(int M) { return M == 1 ? 1 : (M + 3) / 4 * 4; }

int rknpu_m_tile(int kc) {
    if (kc <= 0) return 0;
    /* data banks ceil(Mt * kc / bank) + 1 and one weight bank: Mt * kc <= 10 banks */
    long banks = (long)(RKNPU_CBUF_BANKS - 2) * RKNPU_CBUF_BANK_BYTES / kc;
    long measured = kc <= 512 ? 704 : kc <= 1024 ? 320 : kc <= 2048 ? 128 : 64;
    long mt = banks < measured ? banks : measured;
    if (mt > 1022) mt = 1022; /* FEATURE_GRAINS = Mt + 1 in 10 bits */
    return (int)(mt / 4 * 4);
}

int rknpu_k_slices(int K) { return (K + PACK_RKNPU_K_SLICE - 1) / PACK_RKNPU_K_SLICE; }
int rknpu_n_slices(int N) { return (N + PACK_RKNPU_N_SLICE - 1) / PACK_RKNPU_N_SLICE; }

static int m_tiles(int M, int kc) {
    int mp = rknpu_rows(M), mt = rknpu_m_tile(kc);
    return mt > 0 ? (mp + mt - 1) / mt : 0;
}

int rknpu_program_count(int M, int K, int N) {
    int n = 0;
    for (int k0 = 0; k0 < K; k0 += PACK_RKNPU_K_SLICE) {
        int kc = K - k0 < PACK_RKNPU_K_SLICE ? K - k0 : PACK_RKNPU_K_SLICE;
        n += m_tiles(M, kc);
    }
    return n * rknpu_n_slices(N);
}

uint64_t rknpu_feature_bytes(int M, int K) { return (uint64_t)rknpu_rows(M) * (uint64_t)K; }

uint64_t rknpu_output_bytes(int M, int K, int N) {
    return (uint64_t)rknpu_k_slices(K) * (uint64_t)rknpu_rows(M) * (uint64_t)N * 4;
}

uint32_t rknpu_amount(size_t words) { return (uint32_t)((words + 1) / 2 - 1); }
uint32_t rknpu_regcfg_amount(size_t words) { return (uint32_t)(words - RKNPU_TRAILER_WORDS); }

/* A program being written: its words, and the first field that did not fit. */
struct prog {
    uint64_t *w;
    int n;
    const char *bad_reg, *bad_field;
    uint32_t bad_value;
};

static void put(struct prog *p, enum rknpu_reg_id r, const uint32_t *fields, int n) {
    uint32_t value = 0;
    int bad = 0;
    if (rknpu_value(r, fields, n, &value, &bad) != 0 && !p->bad_reg) {
        p->bad_reg = rknpu_regs[r].name;
        p->bad_field = rknpu_regs[r].fields[bad].name;
        p->bad_value = fields[bad];
    }
    p->w[p->n++] = rknpu_word(rknpu_regs[r].target, value, rknpu_regs[r].addr);
}

#define PUT(p, r, ...) put(p, r, (const uint32_t[]){__VA_ARGS__}, (int)(sizeof((const uint32_t[]){__VA_ARGS__}) / 4))

/* One program's geometry. */
struct tile {
    int mt, kc, nc, mp;
    uint32_t feature, weights, output;
};

static void emit_cna(struct prog *p, const struct tile *t) {
    int data_banks = (int)(((uint64_t)t->mt * (uint64_t)t->kc + RKNPU_CBUF_BANK_BYTES - 1) / RKNPU_CBUF_BANK_BYTES) + 1;
    PUT(p, RK_CNA_CONV_CON1, 0, 0 /* int8 in */, 0 /* int8 proc */, 1);
    PUT(p, RK_CNA_CONV_CON2, (uint32_t)t->mt + 1);
    PUT(p, RK_CNA_CONV_CON3, 1, 1);
    PUT(p, RK_CNA_DATA_SIZE0, (uint32_t)t->mt, 1);
    PUT(p, RK_CNA_DATA_SIZE1, (uint32_t)t->kc, (uint32_t)t->kc - 1);
    PUT(p, RK_CNA_DATA_SIZE2, 1);
    PUT(p, RK_CNA_DATA_SIZE3, (uint32_t)t->mt);
    PUT(p, RK_CNA_WEIGHT_SIZE0, (uint32_t)t->kc * (uint32_t)t->nc);
    PUT(p, RK_CNA_WEIGHT_SIZE1, (uint32_t)t->kc);
    PUT(p, RK_CNA_WEIGHT_SIZE2, (uint32_t)t->nc, 1, 1);
    PUT(p, RK_CNA_CBUF_CON0, (uint32_t)data_banks, (uint32_t)(RKNPU_CBUF_BANKS - data_banks));
    PUT(p, RK_CNA_CBUF_CON1, (uint32_t)(t->kc + 63) / 64);
    PUT(p, RK_CNA_CVT_CON0, 1, 1, 1);
    for (int i = 0; i < 4; i++) PUT(p, RK_CNA_CVT_CON1 + i, 0, 1);
    PUT(p, RK_CNA_CVT_CON5, 0);
    PUT(p, RK_CNA_FC_CON0, 0);
    PUT(p, RK_CNA_FC_CON1, 0);
    PUT(p, RK_CNA_FC_CON2, 0);
    PUT(p, RK_CNA_PAD_CON0, 0);
    PUT(p, RK_CNA_PAD_CON1, 0);
    PUT(p, RK_CNA_FEATURE_DATA_ADDR, t->feature);
    PUT(p, RK_CNA_DMA_CON0, 15, 15);
    PUT(p, RK_CNA_DMA_CON1, 1);                 /* a width-1 line is one 16-byte atom */
    PUT(p, RK_CNA_DMA_CON2, (uint32_t)t->mp);   /* surfaces are the whole cube's rows apart */
    PUT(p, RK_CNA_FC_DATA_SIZE0, (uint32_t)t->mt, 1);
    PUT(p, RK_CNA_FC_DATA_SIZE1, (uint32_t)t->kc);
    PUT(p, RK_CNA_DCOMP_CTRL, 0);
    PUT(p, RK_CNA_DCOMP_REGNUM, 0);
    PUT(p, RK_CNA_DCOMP_ADDR0, t->weights);
    for (int i = 0; i < 16; i++) PUT(p, RK_CNA_DCOMP_AMOUNT0 + i, 0);
}

static void emit_core(struct prog *p, const struct tile *t) {
    PUT(p, RK_CORE_MISC_CFG, 1, 0 /* int8 */);
    PUT(p, RK_CORE_DATAOUT_SIZE_0, 0, (uint32_t)t->mt - 1);
    PUT(p, RK_CORE_DATAOUT_SIZE_1, (uint32_t)t->nc - 1);
    PUT(p, RK_CORE_CLIP_TRUNCATE, 0);
    PUT(p, RK_CORE_3030, 0);
}

static void emit_dpu(struct prog *p, const struct tile *t) {
    PUT(p, RK_DPU_FEATURE_MODE_CFG, 2, 15);
    PUT(p, RK_DPU_DATA_FORMAT, 0, 0, 4 /* int32 out */);
    PUT(p, RK_DPU_DST_BASE_ADDR, t->output);
    PUT(p, RK_DPU_DST_SURF_STRIDE, (uint32_t)t->mp); /* 4 int32 channels x Mp rows, in 16-byte units */
    PUT(p, RK_DPU_DATA_CUBE_WIDTH, 0);
    PUT(p, RK_DPU_DATA_CUBE_HEIGHT, (uint32_t)t->mt - 1);
    PUT(p, RK_DPU_DATA_CUBE_NOTCH_ADDR, 0, 0);
    PUT(p, RK_DPU_DATA_CUBE_CHANNEL, (uint32_t)t->nc - 1, (uint32_t)t->nc - 1);
    PUT(p, RK_DPU_BS_CFG, 1, 1, 1, 1);
    PUT(p, RK_DPU_BS_OW_CFG, 1, 7, 7, 7);
    PUT(p, RK_DPU_WDMA_SIZE_0, (uint32_t)t->nc - 1);
    PUT(p, RK_DPU_WDMA_SIZE_1, 0, (uint32_t)t->mt - 1);
    PUT(p, RK_DPU_BN_CFG, 1, 1, 1, 1);
    PUT(p, RK_DPU_EW_CFG, 1, 1, 1, 1, 1);
    PUT(p, RK_DPU_OUT_CVT_OFFSET, 0);
    PUT(p, RK_DPU_OUT_CVT_SCALE, 1);
    PUT(p, RK_DPU_OUT_CVT_SHIFT, 0);
    PUT(p, RK_DPU_SURFACE_ADD, 8 * (uint32_t)t->mp);
    PUT(p, RK_DPU_40C4, 0);
}

static int emit_program(struct rknpu_stream *s, const struct tile *t) {
    if (s->cap - s->n < RKNPU_PROGRAM_WORDS)
        return moex_errorf("rknpu: the command stream is full (%zu words)", s->cap);
    struct prog p = {.w = s->words + s->n};
    PUT(&p, RK_DPU_S_POINTER, 0, 1, 1, 1, 0);
    emit_cna(&p, t);
    emit_core(&p, t);
    emit_dpu(&p, t);
    p.w[p.n++] = 0; /* pads the program to an even length */
    PUT(&p, RK_PC_BASE_ADDRESS, 0, 0);
    PUT(&p, RK_PC_REGISTER_AMOUNTS, 0);
    p.w[p.n++] = rknpu_word(RKNPU_T_PC_OP40, 0, 0);
    PUT(&p, RK_PC_OPERATION_ENABLE, RKNPU_ENABLE_CONV);
    if (p.bad_reg)
        return moex_errorf("rknpu: %s.%s = %u does not fit its field", p.bad_reg, p.bad_field, p.bad_value);
    s->n += RKNPU_PROGRAM_WORDS;
    s->programs++;
    return 0;
}

static int address(uint64_t va, const char *what, uint32_t *out) {
    if (va > UINT32_MAX || va % 16)
        return moex_errorf("rknpu: %s at NPU VA 0x%llx (32-bit, 16-byte aligned)", what, (unsigned long long)va);
    *out = (uint32_t)va;
    return 0;
}

int rknpu_emit_matmul(struct rknpu_stream *s, const struct rknpu_matmul *mm) {
    int M = mm->M, K = mm->K, N = mm->N;
    if (M < 1 || K < PACK_RKNPU_TILE || N < PACK_RKNPU_TILE || K % PACK_RKNPU_TILE || N % PACK_RKNPU_TILE ||
        K > RKNPU_MAX_K)
        return moex_errorf("rknpu: a %d x %d x %d matmul (M >= 1, K and N multiples of 32, K <= %d)", M, K, N,
                           RKNPU_MAX_K);
    const int mp = rknpu_rows(M);
    for (int n0 = 0; n0 < N; n0 += PACK_RKNPU_N_SLICE) {
        int nc = N - n0 < PACK_RKNPU_N_SLICE ? N - n0 : PACK_RKNPU_N_SLICE;
        for (int k0 = 0, ks = 0; k0 < K; k0 += PACK_RKNPU_K_SLICE, ks++) {
            int kc = K - k0 < PACK_RKNPU_K_SLICE ? K - k0 : PACK_RKNPU_K_SLICE, mt_max = rknpu_m_tile(kc);
            for (int m0 = 0; m0 < mp; m0 += mt_max) {
                struct tile t = {.mt = mp - m0 < mt_max ? mp - m0 : mt_max, .kc = kc, .nc = nc, .mp = mp};
                uint64_t out = mm->output + (uint64_t)ks * (uint64_t)mp * (uint64_t)N * 4 +
                               (uint64_t)n0 * (uint64_t)mp * 4 + (uint64_t)m0 * 16;
                if (address(mm->feature + (uint64_t)k0 * (uint64_t)mp + (uint64_t)m0 * 16, "a feature tile",
                            &t.feature) ||
                    address(mm->weights + pack_rknpu_buffer(K, N, n0, k0), "a weight buffer", &t.weights) ||
                    address(out, "an output tile", &t.output) || emit_program(s, &t))
                    return -1;
            }
        }
    }
    return 0;
}

void rknpu_stream_link(struct rknpu_stream *s, bool chain) {
    for (int i = 0; i < s->programs; i++) {
        uint64_t *trailer = s->words + (size_t)(i + 1) * RKNPU_PROGRAM_WORDS - RKNPU_TRAILER_WORDS;
        bool next = chain && i + 1 < s->programs;
        uint32_t addr = next ? s->base + (uint32_t)((size_t)(i + 1) * RKNPU_PROGRAM_WORDS * 8) : 0;
        uint32_t amount = next ? rknpu_amount(RKNPU_PROGRAM_WORDS) : 0;
        trailer[0] = rknpu_word(RKNPU_T_PC, addr, rknpu_regs[RK_PC_BASE_ADDRESS].addr);
        trailer[1] = rknpu_word(RKNPU_T_PC, amount, rknpu_regs[RK_PC_REGISTER_AMOUNTS].addr);
    }
}

void rknpu_feature_fill(int8_t *cube, const int8_t *a, size_t stride, int M, int K) {
    const int mp = rknpu_rows(M);
    for (int s = 0; s < K / RKNPU_FEATURE_ATOM; s++) {
        int8_t *surface = cube + (size_t)s * (size_t)mp * RKNPU_FEATURE_ATOM;
        for (int m = 0; m < M; m++)
            memcpy(surface + (size_t)m * RKNPU_FEATURE_ATOM, a + (size_t)m * stride + (size_t)s * RKNPU_FEATURE_ATOM,
                   RKNPU_FEATURE_ATOM);
        memset(surface + (size_t)M * RKNPU_FEATURE_ATOM, 0, (size_t)(mp - M) * RKNPU_FEATURE_ATOM);
    }
}

/* Calls fn for each tile of an M x K x N matmul, in program order. */
static void for_each_tile(int M, int K, int N, void (*fn)(void *arg, int mt, int kc, int nc), void *arg) {
    const int mp = rknpu_rows(M);
    for (int n0 = 0; n0 < N; n0 += PACK_RKNPU_N_SLICE) {
        int nc = N - n0 < PACK_RKNPU_N_SLICE ? N - n0 : PACK_RKNPU_N_SLICE;
        for (int k0 = 0; k0 < K; k0 += PACK_RKNPU_K_SLICE) {
            int kc = K - k0 < PACK_RKNPU_K_SLICE ? K - k0 : PACK_RKNPU_K_SLICE, mt_max = rknpu_m_tile(kc);
            for (int m0 = 0; m0 < mp; m0 += mt_max) fn(arg, mp - m0 < mt_max ? mp - m0 : mt_max, kc, nc);
        }
    }
}

static void add_tile(void *arg, int mt, int kc, int nc) {
    struct rknpu_cost *c = arg;
    c->tasks++;
    c->words += RKNPU_PROGRAM_WORDS;
    c->feature_bytes += (uint64_t)mt * (uint64_t)kc;
    c->weight_bytes += (uint64_t)kc * (uint64_t)nc;
    c->output_bytes += (uint64_t)mt * (uint64_t)nc * 4;
}

void rknpu_cost_matmul(struct rknpu_cost *c, int M, int K, int N) { for_each_tile(M, K, N, add_tile, c); }

int rknpu_batch_plan(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim, int *submit_of,
                     int *order) {
    int submits = 0, placed = 0, cur_buffer = -1;
    uint64_t feat = 0, out = 0, words = 0;
    for (int first = 0; first < n; first++) {
        bool seen = false; /* the jobs of each buffer go once, at its first appearance */
        for (int j = 0; j < first && !seen; j++) seen = jobs[j].buffer == jobs[first].buffer;
        if (seen) continue;
        for (int j = first; j < n; j++) {
            if (jobs[j].buffer != jobs[first].buffer) continue;
            const struct rknpu_job_shape *s = &jobs[j];
            uint64_t f = rknpu_feature_bytes(s->M, s->K), o = rknpu_output_bytes(s->M, s->K, s->N);
            uint64_t w = (uint64_t)rknpu_program_count(s->M, s->K, s->N) * RKNPU_PROGRAM_WORDS;
            if (f > lim->feature_bytes || o > lim->output_bytes || w > lim->program_words)
                return moex_errorf("rknpu: a %d x %d x %d job needs more scratch than the device has", s->M, s->K,
                                   s->N);
            if (submits == 0 || cur_buffer != s->buffer || feat + f > lim->feature_bytes ||
                out + o > lim->output_bytes || words + w > lim->program_words) {
                submits++;
                cur_buffer = s->buffer;
                feat = out = words = 0;
            }
            feat += f;
            out += o;
            words += w;
            submit_of[j] = submits - 1;
            order[placed++] = j;
        }
    }
    return submits;
}

int rknpu_batch_cost(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim, struct rknpu_cost *c) {
    enum { MAX = 1024 };
    int submit_of[MAX], order[MAX];
    if (n < 0 || n > MAX) return moex_errorf("rknpu: %d jobs in a batch (at most %d)", n, MAX);
    memset(c, 0, sizeof *c);
    int submits = rknpu_batch_plan(jobs, n, lim, submit_of, order);
    if (submits < 0) return -1;
    c->submits = (uint64_t)submits;
    for (int j = 0; j < n; j++) rknpu_cost_matmul(c, jobs[j].M, jobs[j].K, jobs[j].N);
    return 0;
}

struct task_list {
    struct rknpu_task_cost *tasks, at;
    int max, n;
};

static void list_tile(void *arg, int mt, int kc, int nc) {
    struct task_list *l = arg;
    if (l->tasks && l->n < l->max) {
        struct rknpu_task_cost t = l->at;
        t.mt = mt, t.kc = kc, t.nc = nc, t.words = RKNPU_PROGRAM_WORDS;
        t.feature_bytes = (uint64_t)mt * (uint64_t)kc;
        t.weight_bytes = (uint64_t)kc * (uint64_t)nc;
        t.output_bytes = (uint64_t)mt * (uint64_t)nc * 4;
        l->tasks[l->n] = t;
    }
    l->n++;
}

int rknpu_batch_tasks(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim,
                      struct rknpu_task_cost *tasks, int max) {
    enum { MAX = 1024 };
    int submit_of[MAX], order[MAX];
    if (n < 0 || n > MAX) return moex_errorf("rknpu: %d jobs in a batch (at most %d)", n, MAX);
    if (rknpu_batch_plan(jobs, n, lim, submit_of, order) < 0) return -1;
    struct task_list l = {.tasks = tasks, .max = max};
    for (int i = 0; i < n; i++) {
        const struct rknpu_job_shape *j = &jobs[order[i]];
        l.at = (struct rknpu_task_cost){.submit = submit_of[order[i]], .job = order[i]};
        for_each_tile(j->M, j->K, j->N, list_tile, &l);
    }
    return l.n;
}

struct rknpu_limits rknpu_limits_for(uint64_t scratch) {
    return (struct rknpu_limits){ scratch / 2, scratch, scratch / 4 / 8 };
}
