/* The register-level NPU model (rknpu_model.h). A program is decoded into
 * the register table's values, checked against every rule the generator
 * follows (each a documented way to compute garbage on the board), then
 * executed: feature tile x weight buffer -> int32 output tile. */
#include "dev/rknpu_model.h"

#include "dev/rknpu_gen.h"
#include "dev/rknpu_regs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const refusal_names[RKNPU_N_REFUSALS] = {
    [RKNPU_RUN_OK] = "ok",
    [RKNPU_R_M_MULTIPLE] = "m-not-multiple-of-4",
    [RKNPU_R_K_MULTIPLE] = "k-not-multiple-of-32",
    [RKNPU_R_N_MULTIPLE] = "n-not-multiple-of-32",
    [RKNPU_R_FIELD] = "field-wraps",
    [RKNPU_R_CBUF] = "cbuf-overrun",
    [RKNPU_R_S_POINTER] = "s-pointer-in-program",
    [RKNPU_R_TRAILER] = "bad-trailer",
    [RKNPU_R_BOUNDS] = "address-out-of-bounds",
    [RKNPU_R_WEIGHT_BUFS] = "chain-over-two-weight-buffers",
    [RKNPU_R_PRECISION] = "not-w8a8",
    [RKNPU_R_RDMA] = "rdma-unconfigured",
    [RKNPU_R_INCOMPLETE] = "incomplete-program",
    [RKNPU_R_CHAIN] = "broken-chain",
    [RKNPU_R_IN_OUT] = "bo-in-and-out",
    [RKNPU_R_UNSYNCED] = "unsynced-buffer",
    [RKNPU_R_SUBCORE] = "empty-subcore-task",
    [RKNPU_R_NOT_RESET] = "int8-without-reset",
    [RKNPU_R_FULL_DOMAIN] = "full-domain",
};

const char *rknpu_refusal_name(int r) {
    return r >= 0 && r < RKNPU_N_REFUSALS && refusal_names[r] ? refusal_names[r] : "unknown";
}

/* One decoded program. */
struct decoded {
    uint32_t v[RKNPU_N_REGS];
    bool set[RKNPU_N_REGS];
};

struct run {
    const struct rknpu_mem_view *mem;
    char *why;
    size_t why_len;
};

static int refuse(struct run *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(r->why, r->why_len, "%s: ", rknpu_refusal_name(code));
    if (n >= 0 && (size_t)n < r->why_len) vsnprintf(r->why + n, r->why_len - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

static uint32_t F(const struct decoded *d, enum rknpu_reg_id reg, int field) {
    return rknpu_field_get(reg, field, d->v[reg]);
}

/* Words [0, n) of a program into d: the trailer must be the last four. */
static int decode(struct run *r, const uint64_t *w, uint32_t n, struct decoded *d) {
    memset(d, 0, sizeof *d);
    if (n < RKNPU_TRAILER_WORDS + 1 || n % 2)
        return refuse(r, RKNPU_R_TRAILER, "a program of %u words (an even count, the 4-word trailer included)", n);
    const uint64_t *t = w + n - RKNPU_TRAILER_WORDS;
    if (rknpu_reg_find(rknpu_word_target(t[0]), rknpu_word_reg(t[0])) != RK_PC_BASE_ADDRESS ||
        rknpu_reg_find(rknpu_word_target(t[1]), rknpu_word_reg(t[1])) != RK_PC_REGISTER_AMOUNTS ||
        rknpu_word_target(t[2]) != RKNPU_T_PC_OP40 ||
        rknpu_reg_find(rknpu_word_target(t[3]), rknpu_word_reg(t[3])) != RK_PC_OPERATION_ENABLE)
        return refuse(r, RKNPU_R_TRAILER, "the last 4 of %u words are not BASE_ADDRESS, REGISTER_AMOUNTS, OP_40, "
                                          "OPERATION_ENABLE (OPERATION_ENABLE is never executed)", n);
    for (uint32_t i = 0; i < n; i++) {
        if (w[i] == 0 || rknpu_word_target(w[i]) == RKNPU_T_PC_OP40) continue;
        int reg = rknpu_reg_find(rknpu_word_target(w[i]), rknpu_word_reg(w[i]));
        if (reg < 0)
            return refuse(r, RKNPU_R_FIELD, "word %u writes target 0x%04x register 0x%04x, which no rule covers", i,
                          rknpu_word_target(w[i]), rknpu_word_reg(w[i]));
        if (reg == RK_CNA_S_POINTER || reg == RK_CORE_S_POINTER)
            return refuse(r, RKNPU_R_S_POINTER, "word %u writes %s.%s (the kernel owns it; the job hangs)", i,
                          rknpu_regs[reg].block, rknpu_regs[reg].name);
        if ((reg == RK_PC_BASE_ADDRESS || reg == RK_PC_REGISTER_AMOUNTS || reg == RK_PC_OPERATION_ENABLE) &&
            i < n - RKNPU_TRAILER_WORDS)
            return refuse(r, RKNPU_R_TRAILER, "word %u writes PC.%s before the trailer", i, rknpu_regs[reg].name);
        uint32_t value = rknpu_word_value(w[i]);
        if (rknpu_reserved_bits((enum rknpu_reg_id)reg, value))
            return refuse(r, RKNPU_R_FIELD, "%s.%s = 0x%08x sets bits no field names (a value wrapped)",
                          rknpu_regs[reg].block, rknpu_regs[reg].name, value);
        d->v[reg] = value;
        d->set[reg] = true;
    }
    return RKNPU_RUN_OK;
}

/* Two values the program must keep equal, or a field wrapped. */
#define AGREE(a, b, what)                                                                                            \
    do {                                                                                                             \
        if ((uint64_t)(a) != (uint64_t)(b))                                                                          \
            return refuse(r, RKNPU_R_FIELD, "%s: %llu against %llu", what, (unsigned long long)(a),                  \
                          (unsigned long long)(b));                                                                  \
    } while (0)

/* The geometry a checked program computes. */
struct geom {
    uint32_t h, c, k; /* rows, input channels, kernels */
    uint32_t feature, feature_surf, weights, output, output_surf; /* VAs; strides in 16-byte units */
};

static int check(struct run *r, const struct decoded *d, struct geom *g) {
    for (int reg = RK_DPU_S_POINTER + 1; reg < RK_RDMA_DATA_CUBE_WIDTH; reg++)
        if (!d->set[reg] && reg != RK_RDMA_S_POINTER)
            return refuse(r, RKNPU_R_INCOMPLETE, "%s.%s is not written (a task would inherit the group two tasks "
                                                 "back)", rknpu_regs[reg].block, rknpu_regs[reg].name);
    uint32_t enable = F(d, RK_PC_OPERATION_ENABLE, 0);
    if (enable == RKNPU_ENABLE_CONV_RDMA && !d->set[RK_RDMA_DATA_CUBE_WIDTH])
        return refuse(r, RKNPU_R_RDMA, "OPERATION_ENABLE 0x%x takes DPU_RDMA in, but no RDMA register is set", enable);
    if (enable != RKNPU_ENABLE_CONV && enable != RKNPU_ENABLE_CONV_RDMA)
        return refuse(r, RKNPU_R_PRECISION, "OPERATION_ENABLE 0x%x is not a convolution (0x0D or 0x1D)", enable);
    if (F(d, RK_CNA_CONV_CON1, 0) != 0 || F(d, RK_CNA_CONV_CON1, 1) != 0 || F(d, RK_CNA_CONV_CON1, 2) != 0 ||
        F(d, RK_CORE_MISC_CFG, 1) != 0 || F(d, RK_DPU_DATA_FORMAT, 2) != 4)
        return refuse(r, RKNPU_R_PRECISION, "not int8 in, int8 processing, int32 out (CONV_CON1 0x%08x, MISC_CFG "
                                            "0x%08x, DATA_FORMAT 0x%08x)", d->v[RK_CNA_CONV_CON1],
                      d->v[RK_CORE_MISC_CFG], d->v[RK_DPU_DATA_FORMAT]);
    if (d->v[RK_DPU_BS_CFG] != 0x53 || d->v[RK_DPU_BN_CFG] != 0x53 || d->v[RK_DPU_EW_CFG] != 0x383 ||
        d->v[RK_DPU_OUT_CVT_SCALE] != 1 || d->v[RK_DPU_OUT_CVT_SHIFT] != 0 || d->v[RK_DPU_OUT_CVT_OFFSET] != 0 ||
        d->v[RK_CORE_CLIP_TRUNCATE] != 0)
        return refuse(r, RKNPU_R_PRECISION, "the DPU is not a bypass with the identity OUT_CVT");
    g->h = F(d, RK_CNA_DATA_SIZE0, 0);
    g->c = F(d, RK_CNA_DATA_SIZE1, 0);
    g->k = F(d, RK_CNA_WEIGHT_SIZE2, 0);
    if (F(d, RK_CNA_DATA_SIZE0, 1) != 1 || F(d, RK_CNA_DATA_SIZE2, 0) != 1 || F(d, RK_CNA_WEIGHT_SIZE2, 1) != 1 ||
        F(d, RK_CNA_WEIGHT_SIZE2, 2) != 1)
        return refuse(r, RKNPU_R_PRECISION, "not a 1x1 convolution of width 1");
    if (g->h == 0 || (g->h != 1 && g->h % 4))
        return refuse(r, RKNPU_R_M_MULTIPLE, "height %u (M must be 1 or a multiple of 4)", g->h);
    if (g->c == 0 || g->c % 32) return refuse(r, RKNPU_R_K_MULTIPLE, "%u channels (K must be a multiple of 32)", g->c);
    if (g->k == 0 || g->k % 32) return refuse(r, RKNPU_R_N_MULTIPLE, "%u kernels (N must be a multiple of 32)", g->k);
    AGREE(F(d, RK_CNA_DATA_SIZE1, 1) + 1, g->c, "DATA_SIZE1 channel_real + 1 vs channel");
    AGREE(F(d, RK_CNA_DATA_SIZE3, 0), g->h, "DATA_SIZE3 atomics vs height");
    AGREE(F(d, RK_CNA_CONV_CON2, 0), g->h + 1, "FEATURE_GRAINS vs height + 1");
    AGREE(F(d, RK_CNA_FC_DATA_SIZE0, 0), g->h, "FC_DATA_SIZE0 height vs height");
    AGREE(F(d, RK_CNA_FC_DATA_SIZE1, 0), g->c, "FC_DATA_SIZE1 channels vs channels");
    AGREE(F(d, RK_CNA_WEIGHT_SIZE1, 0), g->c, "WEIGHT_SIZE1 bytes per kernel vs channels");
    AGREE(F(d, RK_CNA_WEIGHT_SIZE0, 0), (uint64_t)g->c * g->k, "WEIGHT_SIZE0 bytes vs channels x kernels");
    AGREE(F(d, RK_CNA_CBUF_CON1, 0), (g->c + 63) / 64, "CBUF_CON1 entries vs ceil(channels / 64)");
    AGREE(F(d, RK_CORE_DATAOUT_SIZE_0, 1) + 1, g->h, "CORE DATAOUT height vs height");
    AGREE(F(d, RK_CORE_DATAOUT_SIZE_0, 0), 0, "CORE DATAOUT width - 1");
    AGREE(F(d, RK_CORE_DATAOUT_SIZE_1, 0) + 1, g->k, "CORE DATAOUT channels vs kernels");
    AGREE(F(d, RK_DPU_DATA_CUBE_HEIGHT, 0) + 1, g->h, "DPU cube height vs height");
    AGREE(F(d, RK_DPU_DATA_CUBE_WIDTH, 0), 0, "DPU cube width - 1");
    AGREE(F(d, RK_DPU_DATA_CUBE_CHANNEL, 0) + 1, g->k, "DPU cube channels vs kernels");
    AGREE(F(d, RK_DPU_DATA_CUBE_CHANNEL, 1) + 1, g->k, "DPU cube original channels vs kernels");
    AGREE(F(d, RK_DPU_WDMA_SIZE_0, 0) + 1, g->k, "WDMA channels vs kernels");
    AGREE(F(d, RK_DPU_WDMA_SIZE_1, 1) + 1, g->h, "WDMA height vs height");
    AGREE(F(d, RK_DPU_SURFACE_ADD, 0), 8 * F(d, RK_DPU_DST_SURF_STRIDE, 0), "SURFACE_ADD vs 8 x DST_SURF_STRIDE");
    AGREE(F(d, RK_CNA_DMA_CON1, 0), 1, "LINE_STRIDE of a width-1 feature");
    uint32_t data_banks = F(d, RK_CNA_CBUF_CON0, 0), weight_banks = F(d, RK_CNA_CBUF_CON0, 1);
    uint64_t need = ((uint64_t)g->h * g->c + RKNPU_CBUF_BANK_BYTES - 1) / RKNPU_CBUF_BANK_BYTES + 1;
    if (data_banks + weight_banks > RKNPU_CBUF_BANKS || weight_banks < 1 || data_banks < need)
        return refuse(r, RKNPU_R_CBUF, "%u data + %u weight banks for %u x %u int8 features (%llu data banks with the "
                                       "slack bank, 12 in all)", data_banks, weight_banks, g->h, g->c,
                      (unsigned long long)need);
    g->feature = d->v[RK_CNA_FEATURE_DATA_ADDR];
    g->feature_surf = F(d, RK_CNA_DMA_CON2, 0);
    g->weights = d->v[RK_CNA_DCOMP_ADDR0];
    g->output = d->v[RK_DPU_DST_BASE_ADDR];
    g->output_surf = F(d, RK_DPU_DST_SURF_STRIDE, 0);
    if (g->feature_surf < g->h || g->output_surf < g->h)
        return refuse(r, RKNPU_R_FIELD, "surface strides %u (features) and %u (output) under the height %u",
                      g->feature_surf, g->output_surf, g->h);
    if (g->feature % 16 || g->weights % 16 || g->output % 16)
        return refuse(r, RKNPU_R_BOUNDS, "addresses 0x%x, 0x%x, 0x%x not 16-byte aligned", g->feature, g->weights,
                      g->output);
    return RKNPU_RUN_OK;
}

/* Four kernels' dots over c channels at once. */
static void dot4(const int8_t *a, const int8_t *w, size_t c, int32_t out[4]) {
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < c; i++) {
        int32_t x = a[i];
        s0 += x * w[i];
        s1 += x * w[c + i];
        s2 += x * w[2 * c + i];
        s3 += x * w[3 * c + i];
    }
    out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

static int execute(struct run *r, const struct geom *g, int *weight_buffer, struct rknpu_run_stats *st) {
    uint64_t feat_span = (uint64_t)(g->c / 16 - 1) * g->feature_surf * 16 + (uint64_t)g->h * 16;
    uint64_t out_span = (uint64_t)(g->k / 4 - 1) * g->output_surf * 16 + (uint64_t)g->h * 16;
    int fb = -1, wb = -1, ob = -1;
    const int8_t *feat = r->mem->resolve(r->mem->ctx, g->feature, feat_span, false, &fb);
    const int8_t *wts = r->mem->resolve(r->mem->ctx, g->weights, (uint64_t)g->c * g->k, false, &wb);
    int8_t *out = r->mem->resolve(r->mem->ctx, g->output, out_span, true, &ob);
    if (!feat || !wts || !out)
        return refuse(r, RKNPU_R_BOUNDS, "%s at 0x%x (%llu bytes) is outside the submitter's %sbuffers",
                      !feat ? "the feature cube" : !wts ? "the weights" : "the output cube",
                      !feat ? g->feature : !wts ? g->weights : g->output,
                      (unsigned long long)(!feat ? feat_span : !wts ? (uint64_t)g->c * g->k : out_span),
                      !out && feat && wts ? "out-list " : "");
    if (*weight_buffer >= 0 && wb != *weight_buffer)
        return refuse(r, RKNPU_R_WEIGHT_BUFS, "weights in buffer %d after buffer %d in one chain (cdma address wild)",
                      wb, *weight_buffer);
    *weight_buffer = wb;
    /* gather: rows of features [h][c], kernels [k][c] from the tiles */
    int8_t *a = malloc((size_t)g->h * g->c), *b = malloc((size_t)g->k * g->c);
    if (!a || !b) {
        free(a);
        free(b);
        return refuse(r, RKNPU_R_BOUNDS, "the model is out of host memory");
    }
    for (uint32_t s = 0; s < g->c / 16; s++)
        for (uint32_t m = 0; m < g->h; m++)
            memcpy(a + (size_t)m * g->c + s * 16, feat + ((size_t)s * g->feature_surf + m) * 16, 16);
    const uint32_t kt = g->c / 32;
    for (uint32_t n = 0; n < g->k; n++)
        for (uint32_t t = 0; t < kt; t++)
            memcpy(b + (size_t)n * g->c + t * 32, wts + ((size_t)(n / 32) * kt + t) * 1024 + (n % 32) * 32, 32);
    for (uint32_t m = 0; m < g->h; m++)
        for (uint32_t n = 0; n < g->k; n += 4) {
            int32_t acc[4];
            dot4(a + (size_t)m * g->c, b + (size_t)n * g->c, g->c, acc);
            memcpy(out + ((size_t)(n / 4) * g->output_surf + m) * 16, acc, 16);
        }
    free(a);
    free(b);
    st->tasks++;
    st->feature_bytes += (uint64_t)g->h * g->c;
    st->weight_bytes += (uint64_t)g->c * g->k;
    st->output_bytes += (uint64_t)g->h * g->k * 4;
    return RKNPU_RUN_OK;
}

int rknpu_model_run(const struct rknpu_mem_view *mem, uint32_t start, uint32_t words, int programs,
                    bool follow_chain, int *weight_buffer, struct rknpu_run_stats *st, char *why, size_t why_len) {
    struct run r = {mem, why, why_len};
    uint32_t at = start, n = words;
    for (int p = 0; p < programs; p++) {
        int buf = -1;
        const uint64_t *w = (const uint64_t *)(const void *)mem->resolve(mem->ctx, at, (uint64_t)n * 8, false, &buf);
        if (!w || at % 16)
            return refuse(&r, RKNPU_R_BOUNDS, "program %d: %u words at 0x%x are outside the submitter's buffers", p,
                          n, at);
        struct decoded d;
        struct geom g = {0};
        int rc = decode(&r, w, n, &d);
        if (rc == RKNPU_RUN_OK) rc = check(&r, &d, &g);
        if (rc == RKNPU_RUN_OK) rc = execute(&r, &g, weight_buffer, st);
        if (rc != RKNPU_RUN_OK) return rc;
        st->words += n;
        if (!follow_chain || p + 1 == programs) break;
        uint32_t next = d.v[RK_PC_BASE_ADDRESS] & ~0xfu, amount = F(&d, RK_PC_REGISTER_AMOUNTS, 0);
        if (next == 0)
            return refuse(&r, RKNPU_R_CHAIN, "program %d of %d ends the chain", p + 1, programs);
        at = next;
        n = 2 * (amount + 1);
    }
    return RKNPU_RUN_OK;
}
