/* The RK3588 NPU's registers as this project programs them: a table of named
 * registers and their fields, written from the public facts collected in
 * RKNPU.md (each entry names its source), the 64-bit command word, and a
 * decoder that prints any command stream back as names.
 *
 * A command word is target << 48 | value << 16 | register: the PC walks a
 * stream of them and writes `value` to `register` of the block `target`
 * names (block id + 1). Programs end with a 4-word trailer: the next
 * program's address and length (the PC chain), a word the TRM asks for
 * before the enable, and OPERATION_ENABLE with the blocks that take part. */
#ifndef MOEX_RKNPU_REGS_H
#define MOEX_RKNPU_REGS_H

#include <stddef.h>
#include <stdint.h>

/* Command word targets (Mesa rkt_regcmd.c: block id + 1; RKNPU.md §2). */
enum {
    RKNPU_T_PC = 0x0101,
    RKNPU_T_CNA = 0x0201,
    RKNPU_T_CORE = 0x0801,
    RKNPU_T_DPU = 0x1001,
    RKNPU_T_RDMA = 0x2001,
    RKNPU_T_PC_OP40 = 0x0041,  /* "TRM: before op_en ... must be set" (Mesa trailer) */
    RKNPU_T_PC_ENABLE = 0x0081 /* OPERATION_ENABLE of the blocks (Mesa trailer) */
};

/* OPERATION_ENABLE's block-participation bitmap (bits 1-31 live, gregordinary
 * regcmd-task-model.md): conv with DPU_RDMA 0x1D, without 0x0D (mtx512,
 * ork-driver enable_mask 0xd). */
#define RKNPU_ENABLE_CONV 0x0Du
#define RKNPU_ENABLE_CONV_RDMA 0x1Du

/* Every register the generator writes or the model reads, in program order. */
enum rknpu_reg_id {
    RK_PC_OPERATION_ENABLE,
    RK_PC_BASE_ADDRESS,
    RK_PC_REGISTER_AMOUNTS,
    RK_CNA_S_POINTER,
    RK_CORE_S_POINTER,
    RK_DPU_S_POINTER,
    RK_RDMA_S_POINTER,
    RK_CNA_CONV_CON1,
    RK_CNA_CONV_CON2,
    RK_CNA_CONV_CON3,
    RK_CNA_DATA_SIZE0,
    RK_CNA_DATA_SIZE1,
    RK_CNA_DATA_SIZE2,
    RK_CNA_DATA_SIZE3,
    RK_CNA_WEIGHT_SIZE0,
    RK_CNA_WEIGHT_SIZE1,
    RK_CNA_WEIGHT_SIZE2,
    RK_CNA_CBUF_CON0,
    RK_CNA_CBUF_CON1,
    RK_CNA_CVT_CON0,
    RK_CNA_CVT_CON1,
    RK_CNA_CVT_CON2,
    RK_CNA_CVT_CON3,
    RK_CNA_CVT_CON4,
    RK_CNA_CVT_CON5,
    RK_CNA_FC_CON0,
    RK_CNA_FC_CON1,
    RK_CNA_FC_CON2,
    RK_CNA_PAD_CON0,
    RK_CNA_PAD_CON1,
    RK_CNA_FEATURE_DATA_ADDR,
    RK_CNA_DMA_CON0,
    RK_CNA_DMA_CON1,
    RK_CNA_DMA_CON2,
    RK_CNA_FC_DATA_SIZE0,
    RK_CNA_FC_DATA_SIZE1,
    RK_CNA_DCOMP_CTRL,
    RK_CNA_DCOMP_REGNUM,
    RK_CNA_DCOMP_ADDR0,
    RK_CNA_DCOMP_AMOUNT0, /* ... 16 of them, AMOUNT0 + i */
    RK_CNA_DCOMP_AMOUNT15 = RK_CNA_DCOMP_AMOUNT0 + 15,
    RK_CORE_MISC_CFG,
    RK_CORE_DATAOUT_SIZE_0,
    RK_CORE_DATAOUT_SIZE_1,
    RK_CORE_CLIP_TRUNCATE,
    RK_CORE_3030,
    RK_DPU_FEATURE_MODE_CFG,
    RK_DPU_DATA_FORMAT,
    RK_DPU_DST_BASE_ADDR,
    RK_DPU_DST_SURF_STRIDE,
    RK_DPU_DATA_CUBE_WIDTH,
    RK_DPU_DATA_CUBE_HEIGHT,
    RK_DPU_DATA_CUBE_NOTCH_ADDR,
    RK_DPU_DATA_CUBE_CHANNEL,
    RK_DPU_BS_CFG,
    RK_DPU_BS_OW_CFG,
    RK_DPU_WDMA_SIZE_0,
    RK_DPU_WDMA_SIZE_1,
    RK_DPU_BN_CFG,
    RK_DPU_EW_CFG,
    RK_DPU_OUT_CVT_OFFSET,
    RK_DPU_OUT_CVT_SCALE,
    RK_DPU_OUT_CVT_SHIFT,
    RK_DPU_SURFACE_ADD,
    RK_DPU_40C4,
    RK_RDMA_DATA_CUBE_WIDTH,
    RKNPU_N_REGS
};

#define RKNPU_MAX_FIELDS 6

struct rknpu_field {
    const char *name;
    uint8_t lo, bits; /* value bits [lo, lo + bits) */
};

struct rknpu_reg {
    uint16_t target, addr;
    const char *block, *name;
    const char *source; /* where the offset and the field values come from */
    struct rknpu_field fields[RKNPU_MAX_FIELDS]; /* in the order rknpu_value takes them */
};

extern const struct rknpu_reg rknpu_regs[RKNPU_N_REGS];

static inline uint64_t rknpu_word(uint16_t target, uint32_t value, uint16_t reg) {
    return (uint64_t)target << 48 | (uint64_t)value << 16 | reg;
}
static inline uint16_t rknpu_word_target(uint64_t w) { return (uint16_t)(w >> 48); }
static inline uint32_t rknpu_word_value(uint64_t w) { return (uint32_t)(w >> 16); }
static inline uint16_t rknpu_word_reg(uint64_t w) { return (uint16_t)w; }

/* A register's value from its fields' values in table order (n of them):
 * 0, or -1 with *bad the index of the first field a value does not fit. */
int rknpu_value(enum rknpu_reg_id r, const uint32_t *fields, int n, uint32_t *value, int *bad);
/* Field i of a register value. */
uint32_t rknpu_field_get(enum rknpu_reg_id r, int i, uint32_t value);
/* The bits of a value no field of r names (0 when every set bit is a field's). */
uint32_t rknpu_reserved_bits(enum rknpu_reg_id r, uint32_t value);
/* The register a (target, address) pair names, or -1. */
int rknpu_reg_find(uint16_t target, uint16_t addr);

/* One word as text: "CNA.DATA_SIZE0 = 0x00010040 (DATAIN_WIDTH=1 DATAIN_HEIGHT=64)";
 * unknown registers and trailer words are named as such. Returns what snprintf does. */
int rknpu_decode_word(uint64_t w, char *out, size_t n);

#endif
