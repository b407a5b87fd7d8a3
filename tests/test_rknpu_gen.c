/* The NPU program generator against the register-level model: exact int32
 * results at the shapes of the earlier NPU experiments, each decoded field
 * against the public value it was taken from, and every documented
 * silent-garbage case refused by name. */
#include "harness.h"

#include "core/error.h"
#include "dev/rknpu_gen.h"
#include "dev/rknpu_model.h"
#include "dev/rknpu_regs.h"
#include "pack/pack_rknpu.h"

#include <stdlib.h>
#include <string.h>

/* NPU memory for one run: a few buffers at fixed VAs. */
struct buf {
    uint32_t va;
    uint64_t size;
    int8_t *host;
};
struct arena {
    struct buf b[8];
    int n;
};

static int8_t *resolve(void *ctx, uint32_t va, uint64_t bytes, bool write, int *buffer) {
    struct arena *a = ctx;
    (void)write;
    for (int i = 0; i < a->n; i++)
        if (va >= a->b[i].va && va - a->b[i].va <= a->b[i].size && bytes <= a->b[i].size - (va - a->b[i].va)) {
            *buffer = i;
            return a->b[i].host + (va - a->b[i].va);
        }
    return NULL;
}

static uint32_t add_buf(struct arena *a, uint64_t size) {
    uint32_t va = a->n ? (uint32_t)((a->b[a->n - 1].va + a->b[a->n - 1].size + 0xfffff) & ~0xfffffull) : 0x100000;
    a->b[a->n] = (struct buf){va, size, calloc(1, size ? size : 1)};
    return a->b[a->n++].va;
}

static void arena_free(struct arena *a) {
    for (int i = 0; i < a->n; i++) free(a->b[i].host);
    a->n = 0;
}

static int8_t rand_code(void) { return (int8_t)((int)(test_rand() % 255) - 127); }

/* Programs of one matmul in a chained stream at `va`. */
static struct rknpu_stream stream_for(struct arena *a, int programs) {
    struct rknpu_stream s = {.cap = (size_t)programs * RKNPU_PROGRAM_WORDS};
    s.base = add_buf(a, s.cap * 8);
    s.words = (uint64_t *)(void *)a->b[a->n - 1].host;
    return s;
}

/* Runs C = A x B^T (A [M][K], B [N][K]) through generator and model; checks
 * every value against the reference and the counts against the cost. */
static void check_matmul(int M, int K, int N) {
    int8_t *A = malloc((size_t)M * K), *B = malloc((size_t)N * K);
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = rand_code();
    for (size_t i = 0; i < (size_t)N * K; i++) B[i] = rand_code();
    struct arena a = {0};
    int programs = rknpu_program_count(M, K, N);
    struct rknpu_stream s = stream_for(&a, programs);
    struct rknpu_matmul mm = {M, K, N, add_buf(&a, rknpu_feature_bytes(M, K)), add_buf(&a, (uint64_t)K * N),
                              add_buf(&a, rknpu_output_bytes(M, K, N))};
    rknpu_feature_fill(a.b[1].host, A, (size_t)K, M, K);
    for (int n = 0; n < N; n++) pack_rknpu_scatter(B + (size_t)n * K, K, N, n, a.b[2].host);
    CHECKF(rknpu_emit_matmul(&s, &mm) == 0 && s.programs == programs, "%d x %d x %d: %s", M, K, N, moex_error());
    rknpu_stream_link(&s, true);
    struct rknpu_mem_view view = {&a, resolve};
    struct rknpu_run_stats st = {0};
    char why[256] = "";
    int wb = -1;
    int rc = rknpu_model_run(&view, s.base, RKNPU_PROGRAM_WORDS, s.programs, true, &wb, &st, why, sizeof why);
    CHECKF(rc == RKNPU_RUN_OK, "%d x %d x %d: %s", M, K, N, why);
    const int32_t *out = (const int32_t *)(const void *)a.b[3].host;
    long bad = 0;
    for (int m = 0; m < M && rc == RKNPU_RUN_OK; m++)
        for (int n = 0; n < N; n++) {
            const int8_t *x = A + (size_t)m * K, *w = B + (size_t)n * K;
            int32_t ref = 0;
            for (int k = 0; k < K; k++) ref += (int32_t)x[k] * w[k];
            bad += rknpu_output_at(out, M, K, N, m, n) != ref;
        }
    CHECKF(bad == 0, "%d x %d x %d: %ld values differ from the reference", M, K, N, bad);
    struct rknpu_cost c = {0};
    rknpu_cost_matmul(&c, M, K, N);
    CHECKF(st.tasks == c.tasks && st.words == c.words && st.feature_bytes == c.feature_bytes &&
               st.weight_bytes == c.weight_bytes && st.output_bytes == c.output_bytes,
           "%d x %d x %d: model counted %llu tasks %llu words, generator %llu %llu", M, K, N,
           (unsigned long long)st.tasks, (unsigned long long)st.words, (unsigned long long)c.tasks,
           (unsigned long long)c.words);
    arena_free(&a);
    free(A);
    free(B);
}

/* The first program of an M x K x N matmul, decoded into register values. */
static void first_program(int M, int K, int N, uint32_t v[RKNPU_N_REGS], uint64_t words[RKNPU_PROGRAM_WORDS]) {
    struct rknpu_stream s = {.words = words, .cap = RKNPU_PROGRAM_WORDS, .base = 0x1000};
    struct rknpu_matmul mm = {M, K < 1024 ? K : 1024, N < 8192 ? N : 8192, 0x100000, 0x200000, 0x300000};
    int rc = rknpu_emit_matmul(&s, &mm);
    CHECK(rc == 0);
    rknpu_stream_link(&s, false);
    memset(v, 0, RKNPU_N_REGS * sizeof *v);
    for (int i = 0; i < RKNPU_PROGRAM_WORDS; i++) {
        int r = rknpu_reg_find(rknpu_word_target(words[i]), rknpu_word_reg(words[i]));
        if (r >= 0) v[r] = rknpu_word_value(words[i]);
    }
}

static void test_fields(void) {
    uint32_t v[RKNPU_N_REGS];
    uint64_t w[RKNPU_PROGRAM_WORDS];
    const int M = 64, K = 1024, N = 512;
    first_program(M, K, N, v, w);
    /* the word format and targets (Mesa rkt_regcmd.c) */
    CHECK(rknpu_word_target(w[0]) == 0x1001 && rknpu_word_reg(w[0]) == 0x4004 && rknpu_word_value(w[0]) == 0xE);
    CHECK(rknpu_word(0x0201, 0x12345678, 0x1020) == 0x0201123456781020ull);
    CHECK(rknpu_regs[RK_CNA_CONV_CON1].target == 0x0201 && rknpu_regs[RK_CORE_MISC_CFG].target == 0x0801 &&
          rknpu_regs[RK_DPU_DATA_FORMAT].target == 0x1001 && rknpu_regs[RK_RDMA_S_POINTER].target == 0x2001);
    /* offsets as the TRM names them (ork-driver's key registers, RKNPU.md 8) */
    CHECK(rknpu_regs[RK_CNA_FEATURE_DATA_ADDR].addr == 0x1070 && rknpu_regs[RK_CNA_DCOMP_ADDR0].addr == 0x1110 &&
          rknpu_regs[RK_DPU_DST_BASE_ADDR].addr == 0x4020 && rknpu_regs[RK_CNA_CBUF_CON0].addr == 0x1040 &&
          rknpu_regs[RK_PC_BASE_ADDRESS].addr == 0x0010 && rknpu_regs[RK_PC_REGISTER_AMOUNTS].addr == 0x0014 &&
          rknpu_regs[RK_PC_OPERATION_ENABLE].addr == 0x0008 && rknpu_regs[RK_CORE_3030].addr == 0x3030 &&
          rknpu_regs[RK_DPU_40C4].addr == 0x40C4);
    for (int r = 0; r < RKNPU_N_REGS; r++) CHECK(rknpu_regs[r].source && rknpu_regs[r].name && rknpu_regs[r].fields[0].name);
    /* mtx512's int8 rules (RKNPU.md 4): precision codes, size_e, surf_add, entries, grains */
    CHECK(rknpu_field_get(RK_CNA_CONV_CON1, 1, v[RK_CNA_CONV_CON1]) == 0); /* int8 = 0 */
    CHECK(rknpu_field_get(RK_CNA_CONV_CON1, 2, v[RK_CNA_CONV_CON1]) == 0);
    CHECK(rknpu_field_get(RK_CORE_MISC_CFG, 1, v[RK_CORE_MISC_CFG]) == 0);
    CHECK(rknpu_field_get(RK_DPU_DATA_FORMAT, 2, v[RK_DPU_DATA_FORMAT]) == 4); /* int32 = 4 */
    for (int i = 1; i <= 3; i++) CHECK(rknpu_field_get(RK_DPU_BS_OW_CFG, i, v[RK_DPU_BS_OW_CFG]) == 7);
    CHECK(rknpu_field_get(RK_DPU_SURFACE_ADD, 0, v[RK_DPU_SURFACE_ADD]) == 8 * M);
    CHECK(v[RK_CNA_CBUF_CON1] == K / 64);
    CHECK(rknpu_field_get(RK_CNA_CONV_CON2, 0, v[RK_CNA_CONV_CON2]) == M + 1);
    /* width 1, height M, channels K, kernels N (RKNPU.md 4, 5.2) */
    CHECK(v[RK_CNA_DATA_SIZE0] == (1u << 16 | M) && v[RK_CNA_DATA_SIZE1] == ((uint32_t)(K - 1) << 16 | K));
    CHECK(v[RK_CNA_DATA_SIZE3] == M && v[RK_CNA_WEIGHT_SIZE0] == (uint32_t)K * N && v[RK_CNA_WEIGHT_SIZE1] == K);
    CHECK(v[RK_CNA_WEIGHT_SIZE2] == (1u << 24 | 1u << 16 | N));
    /* count-1 encodings of CORE and DPU (qemu quirks, RKNPU.md 5) */
    CHECK(v[RK_CORE_DATAOUT_SIZE_0] == (uint32_t)(M - 1) << 16 && v[RK_CORE_DATAOUT_SIZE_1] == N - 1);
    CHECK(v[RK_DPU_DATA_CUBE_HEIGHT] == M - 1 && v[RK_DPU_DATA_CUBE_CHANNEL] == ((uint32_t)(N - 1) << 16 | (N - 1)));
    CHECK(v[RK_DPU_WDMA_SIZE_0] == N - 1 && v[RK_DPU_WDMA_SIZE_1] == (uint32_t)(M - 1) << 16);
    /* CBUF: data banks ceil(M K / 32 KiB) + 1, weights the rest of 12 (RKNPU.md 5.5) */
    CHECK(rknpu_field_get(RK_CNA_CBUF_CON0, 0, v[RK_CNA_CBUF_CON0]) == 3 &&
          rknpu_field_get(RK_CNA_CBUF_CON0, 1, v[RK_CNA_CBUF_CON0]) == 9);
    /* DPU bypass, OUT_CVT identity (RKNPU.md 5.3) */
    CHECK(v[RK_DPU_BS_CFG] == 0x53 && v[RK_DPU_BN_CFG] == 0x53 && v[RK_DPU_EW_CFG] == 0x383);
    CHECK(v[RK_DPU_OUT_CVT_SCALE] == 1 && v[RK_DPU_OUT_CVT_SHIFT] == 0 && v[RK_DPU_OUT_CVT_OFFSET] == 0);
    /* operands */
    CHECK(v[RK_CNA_FEATURE_DATA_ADDR] == 0x100000 && v[RK_CNA_DCOMP_ADDR0] == 0x200000 &&
          v[RK_DPU_DST_BASE_ADDR] == 0x300000);
    /* the trailer (Mesa): link, length, OP_40, enable 0x0D (mtx512, ork) */
    CHECK(rknpu_word_target(w[74]) == 0x0101 && rknpu_word_reg(w[74]) == 0x0010);
    CHECK(rknpu_word_target(w[75]) == 0x0101 && rknpu_word_reg(w[75]) == 0x0014);
    CHECK(rknpu_word_target(w[76]) == 0x0041);
    CHECK(w[77] == 0x00810000000d0008ull);
    /* the length rules of the two kernels (RKNPU.md 1, 3) */
    CHECK(rknpu_amount(RKNPU_PROGRAM_WORDS) == 38 && rknpu_regcfg_amount(RKNPU_PROGRAM_WORDS) == 74);
    /* M-tile ceilings: 320 at K 1024 (ork-driver, CBUF rule agree), 4-row multiples */
    CHECK(rknpu_m_tile(1024) == 320 && rknpu_m_tile(768) == 320 && rknpu_m_tile(512) == 640 && rknpu_m_tile(32) == 704);
    CHECK(rknpu_rows(1) == 1 && rknpu_rows(321) == 324 && rknpu_rows(4) == 4);
    char text[512];
    rknpu_decode_word(w[4], text, sizeof text);
    CHECKF(strstr(text, "CNA.DATA_SIZE0") && strstr(text, "DATAIN_HEIGHT=64") && strstr(text, "DATAIN_WIDTH=1"), "%s",
           text);
    rknpu_decode_word(w[77], text, sizeof text);
    CHECKF(strstr(text, "PC.OPERATION_ENABLE") && strstr(text, "BLOCKS=13"), "%s", text);
}

/* A valid 8 x 64 x 64 setup, then one change; the model's refusal code. */
struct setup {
    struct arena a;
    struct rknpu_stream s;
    struct rknpu_matmul mm;
};

static void setup_make(struct setup *t, int matmuls) {
    memset(t, 0, sizeof *t);
    t->s = stream_for(&t->a, 2 * matmuls);
    t->mm = (struct rknpu_matmul){8, 64, 64, add_buf(&t->a, 8 * 64), add_buf(&t->a, 64 * 64), add_buf(&t->a, 8 * 64 * 4)};
    CHECK(rknpu_emit_matmul(&t->s, &t->mm) == 0);
}

static int run(struct setup *t, uint32_t words, char *why, size_t n) {
    rknpu_stream_link(&t->s, true);
    struct rknpu_mem_view view = {&t->a, resolve};
    struct rknpu_run_stats st = {0};
    int wb = -1;
    return rknpu_model_run(&view, t->s.base, words, t->s.programs, true, &wb, &st, why, n);
}

static uint64_t *word_of(struct setup *t, enum rknpu_reg_id r) {
    for (int i = 0; i < RKNPU_PROGRAM_WORDS; i++)
        if (rknpu_reg_find(rknpu_word_target(t->s.words[i]), rknpu_word_reg(t->s.words[i])) == (int)r)
            return &t->s.words[i];
    return NULL;
}

static void set_reg(struct setup *t, enum rknpu_reg_id r, uint32_t value) {
    *word_of(t, r) = rknpu_word(rknpu_regs[r].target, value, rknpu_regs[r].addr);
}

static void expect_refusal(struct setup *t, uint32_t words, int code, const char *what) {
    char why[256] = "";
    int rc = run(t, words, why, sizeof why);
    CHECKF(rc == code && strstr(why, rknpu_refusal_name(code)), "%s: got %s (%s), want %s", what,
           rknpu_refusal_name(rc), why, rknpu_refusal_name(code));
    arena_free(&t->a);
}

static void test_refusals(void) {
    struct setup t;
    char why[256];
    setup_make(&t, 1);
    CHECKF(run(&t, RKNPU_PROGRAM_WORDS, why, sizeof why) == RKNPU_RUN_OK, "%s", why);
    arena_free(&t.a);

    setup_make(&t, 1);
    set_reg(&t, RK_CNA_DATA_SIZE0, 1u << 16 | 6);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_M_MULTIPLE, "M = 6");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_DATA_SIZE1, 47u << 16 | 48);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_K_MULTIPLE, "K = 48");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_WEIGHT_SIZE2, 1u << 24 | 1u << 16 | 48);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_N_MULTIPLE, "N = 48");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_CONV_CON2, ((1028 + 1) & 0x3ff) << 4); /* grains of a 1028-row tile, wrapped */
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_FIELD, "FEATURE_GRAINS wrapped");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_DATA_SIZE0, 1u << 16 | 1u << 12 | 8); /* a height that spilled past 11 bits */
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_FIELD, "DATA_SIZE0 reserved bits");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_CBUF_CON0, 11u << 4 | 1);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_CBUF, "one data bank");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_CBUF_CON0, 11u << 4 | 2);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_CBUF, "13 banks");
    setup_make(&t, 1);
    t.s.words[0] = rknpu_word(RKNPU_T_CNA, 0xE, rknpu_regs[RK_CNA_S_POINTER].addr);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_S_POINTER, "CNA S_POINTER");
    setup_make(&t, 1);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS - 4, RKNPU_R_TRAILER, "the trailer left out of the length");
    setup_make(&t, 1);
    t.s.words[76] = 0;
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_TRAILER, "a short trailer");
    setup_make(&t, 1);
    set_reg(&t, RK_PC_OPERATION_ENABLE, RKNPU_ENABLE_CONV_RDMA);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_RDMA, "RDMA enabled, unconfigured");
    setup_make(&t, 1);
    *word_of(&t, RK_DPU_OUT_CVT_SCALE) = 0;
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_INCOMPLETE, "OUT_CVT_SCALE left out");
    setup_make(&t, 1);
    set_reg(&t, RK_DPU_DATA_FORMAT, 0);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_PRECISION, "int8 output");
    setup_make(&t, 1);
    set_reg(&t, RK_CNA_FEATURE_DATA_ADDR, t.mm.feature + 256);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_BOUNDS, "features past their buffer");
    setup_make(&t, 1);
    set_reg(&t, RK_DPU_DST_BASE_ADDR, 0x7ff00000);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_BOUNDS, "output nowhere");
    /* two matmuls on two weight buffers in one chain */
    setup_make(&t, 2);
    struct rknpu_matmul other = t.mm;
    other.weights = add_buf(&t.a, 64 * 64);
    CHECK(rknpu_emit_matmul(&t.s, &other) == 0);
    expect_refusal(&t, RKNPU_PROGRAM_WORDS, RKNPU_R_WEIGHT_BUFS, "a chain over two weight buffers");
    /* a chain that ends early */
    setup_make(&t, 2);
    CHECK(rknpu_emit_matmul(&t.s, &t.mm) == 0);
    rknpu_stream_link(&t.s, false);
    {
        struct rknpu_mem_view view = {&t.a, resolve};
        struct rknpu_run_stats st = {0};
        int wb = -1;
        int rc = rknpu_model_run(&view, t.s.base, RKNPU_PROGRAM_WORDS, 2, true, &wb, &st, why, sizeof why);
        CHECKF(rc == RKNPU_R_CHAIN, "%s", why);
    }
    arena_free(&t.a);
    /* the generator refuses what it cannot express */
    uint64_t w[RKNPU_PROGRAM_WORDS * 4];
    struct rknpu_stream s = {.words = w, .cap = RKNPU_PROGRAM_WORDS * 4, .base = 0x1000};
    struct rknpu_matmul bad = {8, 48, 64, 0x100000, 0x200000, 0x300000};
    CHECK(rknpu_emit_matmul(&s, &bad) != 0 && strstr(moex_error(), "multiples of 32"));
    bad = (struct rknpu_matmul){8, 64, 64, 0x100008, 0x200000, 0x300000};
    CHECK(rknpu_emit_matmul(&s, &bad) != 0 && strstr(moex_error(), "aligned"));
    bad = (struct rknpu_matmul){1024, 64, 64, 0x100000, 0x200000, 0x300000}; /* 4 tiles of 256: no room */
    s.cap = RKNPU_PROGRAM_WORDS;
    s.n = 0;
    s.programs = 0;
    CHECK(rknpu_emit_matmul(&s, &bad) == 0 || strstr(moex_error(), "full"));
}

static void test_batch_plan(void) {
    struct rknpu_job_shape jobs[5] = {{8, 2048, 768, 0}, {8, 2048, 768, 1}, {4, 768, 2048, 0}, {1, 2048, 768, 1},
                                      {64, 2048, 768, 2}};
    struct rknpu_limits lim = {1 << 20, 1 << 24, 1 << 20};
    int submit_of[5], order[5];
    CHECK(rknpu_batch_plan(jobs, 5, &lim, submit_of, order) == 3);
    CHECK(submit_of[0] == 0 && submit_of[2] == 0 && submit_of[1] == 1 && submit_of[3] == 1 && submit_of[4] == 2);
    CHECK(order[0] == 0 && order[1] == 2 && order[2] == 1 && order[3] == 3 && order[4] == 4);
    struct rknpu_cost c;
    CHECK(rknpu_batch_cost(jobs, 5, &lim, &c) == 0 && c.submits == 3);
    CHECK(c.tasks == (uint64_t)(2 + 1 + 2 + 2 + 2) && c.words == c.tasks * RKNPU_PROGRAM_WORDS);
    struct rknpu_task_cost tasks[16];
    int n_tasks = rknpu_batch_tasks(jobs, 5, &lim, tasks, 16);
    CHECK(n_tasks == (int)c.tasks);
    uint64_t feat = 0, out = 0, words = 0;
    for (int t = 0; t < n_tasks && t < 16; t++) feat += tasks[t].feature_bytes, out += tasks[t].output_bytes, words += tasks[t].words;
    CHECK(feat == c.feature_bytes && out == c.output_bytes && words == c.words);
    CHECK(tasks[0].submit == 0 && tasks[0].job == 0 && tasks[0].mt == 8 && tasks[0].kc == 1024 && tasks[0].nc == 768);
    CHECK(tasks[2].job == 2 && tasks[2].mt == 4 && tasks[2].kc == 768 && tasks[n_tasks - 1].submit == 2);
    CHECK(rknpu_batch_tasks(jobs, 5, &lim, NULL, 0) == n_tasks);
    lim.output_bytes = 64 * 768 * 4 * 2; /* the last job alone fills it */
    CHECK(rknpu_batch_plan(jobs, 5, &lim, submit_of, order) == 3);
    lim.output_bytes = 1024;
    CHECK(rknpu_batch_plan(jobs, 5, &lim, submit_of, order) < 0);
}

int main(void) {
    test_fields();
    test_refusals();
    test_batch_plan();
    /* the experiments' expert shapes (K x N), all M for two, the small M for all */
    static const int shapes[][2] = {{2048, 768}, {768, 2048}, {2048, 512}, {512, 2048}, {2048, 1792}, {1792, 2048}};
    static const int small_m[] = {1, 4, 8, 64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof small_m / sizeof small_m[0]; i++) check_matmul(small_m[i], shapes[s][0], shapes[s][1]);
    check_matmul(320, 2048, 512);
    check_matmul(321, 2048, 512);
    check_matmul(1000, 512, 2048);
    check_matmul(321, 1792, 2048); /* a partial K-slice of 768 under a partial M-tile */
    /* an lm head: 19 N-slices, the last of 4736 channels */
    check_matmul(1, 2048, 151936);
    check_matmul(4, 1024, 151936);
    return test_finish();
}
