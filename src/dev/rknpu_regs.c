/* The register table (rknpu_regs.h). Offsets are the TRM's names and offsets
 * as the public reverse-engineered maps give them; each entry's source string
 * says which public fact fixed its offset and the values the generator
 * writes (RKNPU.md sections). */
#include "dev/rknpu_regs.h"

#include <stdio.h>

#define SRC_TRM "offset: TRM register list (mtx512 include/npu_hw.h, Mesa registers.xml; RKNPU.md 2)"
#define SRC_KERNEL SRC_TRM "; fields: rocket_registers.h as rocket_job_hw_submit writes them (RKNPU.md 1)"
#define SRC_TRAILER SRC_TRM "; value: the conv bitmap 0x0D without DPU_RDMA (mtx512, ork enable_mask 0xd; RKNPU.md 2, 6, 8)"
#define SRC_MESA SRC_TRM "; value: Mesa rkt_regcmd.c (RKNPU.md 2)"
#define SRC_MESA_RDMA "offset: DPU_RDMA block 0x5000 (Mesa target 0x2001, RKNPU.md 2); not verified on a board"
#define SRC_MTX SRC_TRM "; value: mtx512 gen_matmul_int8 int8 rules (RKNPU.md 4: precision int8=0, int32=4, size_e=7, surf_add=8M, entries=ceil(K/64), grains=M+1)"
#define SRC_MODEL5 SRC_TRM "; value: 1x1 conv with width 1, height M, channels K, kernels N (RKNPU.md 4, 5.2)"
#define SRC_CBUF SRC_TRM "; value: data banks ceil(M*K/32K)+1, int8's slack bank (gregordinary cbuf-bank-slack, RKNPU.md 5.5)"
#define SRC_CVT SRC_TRM "; value: input convert bypassed, data_sign=1, scale 1 (RKNPU.md 6)"
#define SRC_CVT_ID SRC_TRM "; value: OUT_CVT identity (RKNPU.md 5.3)"
#define SRC_ZERO SRC_TRM "; value: 0 (RKNPU.md 6, smallest W8A8 program)"
#define SRC_UNDOC "offset: undocumented, written as 0 (Mesa rkt_regcmd.c, mtx512; RKNPU.md 2)"
#define SRC_ORK_ADDR SRC_TRM "; value: an NPU VA, 16-byte aligned (ork-driver 0x1070 A, 0x1110 B, 0x4020 C; RKNPU.md 8)"
#define SRC_ORK_M SRC_TRM "; value: height M (ork-driver: 0x1084 follows M; RKNPU.md 8)"
#define SRC_COUNT SRC_TRM "; value: count-1 encoding of CORE/DPU sizes (qemu NPU_HW_QUIRKS via RKNPU.md 5)"
#define SRC_QUIRKS SRC_TRM "; value: stride << 4 (qemu NPU_HW_QUIRKS via RKNPU.md 5), in 16-byte units: this project's rule, not verified"
#define SRC_STRIDE SRC_TRM "; value: 16-byte units, line 1, surface = the cube's rows (this project's rule; ork-driver lists 0x107c as K-dependent: not verified)"
#define SRC_NOTCH SRC_TRM "; value: 0 (this project's rule; ork-driver lists 0x4038 as N-dependent: not verified)"
#define SRC_BYPASS SRC_TRM "; value: BS/BN/EW bypassed (RKNPU.md 5.3, 6)"

const struct rknpu_reg rknpu_regs[RKNPU_N_REGS] = {
    [RK_PC_OPERATION_ENABLE] = {RKNPU_T_PC_ENABLE, 0x0008, "PC", "OPERATION_ENABLE", SRC_TRAILER, {{"BLOCKS", 0, 16}}},
    [RK_PC_BASE_ADDRESS] = {RKNPU_T_PC, 0x0010, "PC", "BASE_ADDRESS", SRC_KERNEL, {{"PC_SEL", 0, 1}, {"PC_SOURCE_ADDR", 4, 28}}},
    [RK_PC_REGISTER_AMOUNTS] = {RKNPU_T_PC, 0x0014, "PC", "REGISTER_AMOUNTS", SRC_KERNEL, {{"PC_DATA_AMOUNT", 0, 16}}},
    [RK_CNA_S_POINTER] = {RKNPU_T_CNA, 0x1004, "CNA", "S_POINTER", SRC_KERNEL, {{"POINTER", 0, 1}, {"POINTER_PP_EN", 1, 1}, {"EXECUTER_PP_EN", 2, 1}, {"POINTER_PP_MODE", 3, 1}, {"CORE_SEL", 28, 4}}},
    [RK_CORE_S_POINTER] = {RKNPU_T_CORE, 0x3004, "CORE", "S_POINTER", SRC_KERNEL, {{"POINTER", 0, 1}, {"POINTER_PP_EN", 1, 1}, {"EXECUTER_PP_EN", 2, 1}, {"POINTER_PP_MODE", 3, 1}, {"CORE_SEL", 28, 4}}},
    [RK_DPU_S_POINTER] = {RKNPU_T_DPU, 0x4004, "DPU", "S_POINTER", SRC_MESA, {{"POINTER", 0, 1}, {"POINTER_PP_EN", 1, 1}, {"EXECUTER_PP_EN", 2, 1}, {"POINTER_PP_MODE", 3, 1}, {"CORE_SEL", 28, 4}}},
    [RK_RDMA_S_POINTER] = {RKNPU_T_RDMA, 0x5004, "RDMA", "S_POINTER", SRC_MESA_RDMA, {{"POINTER", 0, 1}, {"POINTER_PP_EN", 1, 1}, {"EXECUTER_PP_EN", 2, 1}, {"POINTER_PP_MODE", 3, 1}, {"CORE_SEL", 28, 4}}},
    [RK_CNA_CONV_CON1] = {RKNPU_T_CNA, 0x100C, "CNA", "CONV_CON1", SRC_MTX, {{"CONV_MODE", 0, 4}, {"IN_PRECISION", 4, 3}, {"PROC_PRECISION", 7, 3}, {"GROUP_LINE_OFF", 29, 1}, {"NONALIGN_DMA", 30, 1}}},
    [RK_CNA_CONV_CON2] = {RKNPU_T_CNA, 0x1010, "CNA", "CONV_CON2", SRC_MTX, {{"FEATURE_GRAINS", 4, 10}}},
    [RK_CNA_CONV_CON3] = {RKNPU_T_CNA, 0x1014, "CNA", "CONV_CON3", SRC_MESA, {{"CONV_X_STRIDE", 0, 3}, {"CONV_Y_STRIDE", 3, 3}}},
    [RK_CNA_DATA_SIZE0] = {RKNPU_T_CNA, 0x1020, "CNA", "DATA_SIZE0", SRC_MODEL5, {{"DATAIN_HEIGHT", 0, 11}, {"DATAIN_WIDTH", 16, 11}}},
    [RK_CNA_DATA_SIZE1] = {RKNPU_T_CNA, 0x1024, "CNA", "DATA_SIZE1", SRC_MODEL5, {{"DATAIN_CHANNEL", 0, 16}, {"DATAIN_CHANNEL_REAL", 16, 14}}},
    [RK_CNA_DATA_SIZE2] = {RKNPU_T_CNA, 0x1028, "CNA", "DATA_SIZE2", SRC_MODEL5, {{"DATAOUT_WIDTH", 0, 11}}},
    [RK_CNA_DATA_SIZE3] = {RKNPU_T_CNA, 0x102C, "CNA", "DATA_SIZE3", SRC_MODEL5, {{"DATAOUT_ATOMICS", 0, 22}}},
    [RK_CNA_WEIGHT_SIZE0] = {RKNPU_T_CNA, 0x1030, "CNA", "WEIGHT_SIZE0", SRC_MODEL5, {{"WEIGHT_BYTES", 0, 32}}},
    [RK_CNA_WEIGHT_SIZE1] = {RKNPU_T_CNA, 0x1034, "CNA", "WEIGHT_SIZE1", SRC_MODEL5, {{"WEIGHT_BYTES_PER_KERNEL", 0, 19}}},
    [RK_CNA_WEIGHT_SIZE2] = {RKNPU_T_CNA, 0x1038, "CNA", "WEIGHT_SIZE2", SRC_MODEL5, {{"WEIGHT_KERNELS", 0, 14}, {"WEIGHT_HEIGHT", 16, 5}, {"WEIGHT_WIDTH", 24, 5}}},
    [RK_CNA_CBUF_CON0] = {RKNPU_T_CNA, 0x1040, "CNA", "CBUF_CON0", SRC_CBUF, {{"DATA_BANK", 0, 4}, {"WEIGHT_BANK", 4, 4}}},
    [RK_CNA_CBUF_CON1] = {RKNPU_T_CNA, 0x1044, "CNA", "CBUF_CON1", SRC_MTX, {{"DATA_ENTRIES", 0, 14}}},
    [RK_CNA_CVT_CON0] = {RKNPU_T_CNA, 0x104C, "CNA", "CVT_CON0", SRC_CVT, {{"CVT_BYPASS", 0, 1}, {"CVT_TYPE", 1, 1}, {"DATA_SIGN", 3, 1}}},
    [RK_CNA_CVT_CON1] = {RKNPU_T_CNA, 0x1050, "CNA", "CVT_CON1", SRC_CVT, {{"CVT_OFFSET", 0, 16}, {"CVT_SCALE", 16, 16}}},
    [RK_CNA_CVT_CON2] = {RKNPU_T_CNA, 0x1054, "CNA", "CVT_CON2", SRC_CVT, {{"CVT_OFFSET", 0, 16}, {"CVT_SCALE", 16, 16}}},
    [RK_CNA_CVT_CON3] = {RKNPU_T_CNA, 0x1058, "CNA", "CVT_CON3", SRC_CVT, {{"CVT_OFFSET", 0, 16}, {"CVT_SCALE", 16, 16}}},
    [RK_CNA_CVT_CON4] = {RKNPU_T_CNA, 0x105C, "CNA", "CVT_CON4", SRC_CVT, {{"CVT_OFFSET", 0, 16}, {"CVT_SCALE", 16, 16}}},
    [RK_CNA_CVT_CON5] = {RKNPU_T_CNA, 0x1180, "CNA", "CVT_CON5", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_FC_CON0] = {RKNPU_T_CNA, 0x1060, "CNA", "FC_CON0", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_FC_CON1] = {RKNPU_T_CNA, 0x1064, "CNA", "FC_CON1", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_FC_CON2] = {RKNPU_T_CNA, 0x1074, "CNA", "FC_CON2", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_PAD_CON0] = {RKNPU_T_CNA, 0x1068, "CNA", "PAD_CON0", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_PAD_CON1] = {RKNPU_T_CNA, 0x1184, "CNA", "PAD_CON1", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_FEATURE_DATA_ADDR] = {RKNPU_T_CNA, 0x1070, "CNA", "FEATURE_DATA_ADDR", SRC_ORK_ADDR, {{"ADDR", 0, 32}}},
    [RK_CNA_DMA_CON0] = {RKNPU_T_CNA, 0x1078, "CNA", "DMA_CON0", SRC_MESA, {{"DATA_BURST_LEN", 0, 4}, {"WEIGHT_BURST_LEN", 16, 4}}},
    [RK_CNA_DMA_CON1] = {RKNPU_T_CNA, 0x107C, "CNA", "DMA_CON1", SRC_STRIDE, {{"LINE_STRIDE", 0, 28}}},
    [RK_CNA_DMA_CON2] = {RKNPU_T_CNA, 0x1080, "CNA", "DMA_CON2", SRC_STRIDE, {{"SURF_STRIDE", 0, 28}}},
    [RK_CNA_FC_DATA_SIZE0] = {RKNPU_T_CNA, 0x1084, "CNA", "FC_DATA_SIZE0", SRC_ORK_M, {{"DMA_HEIGHT", 0, 11}, {"DMA_WIDTH", 16, 15}}},
    [RK_CNA_FC_DATA_SIZE1] = {RKNPU_T_CNA, 0x1088, "CNA", "FC_DATA_SIZE1", SRC_MESA, {{"DMA_CHANNEL", 0, 16}}},
    [RK_CNA_DCOMP_CTRL] = {RKNPU_T_CNA, 0x1100, "CNA", "DCOMP_CTRL", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_REGNUM] = {RKNPU_T_CNA, 0x1104, "CNA", "DCOMP_REGNUM", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_ADDR0] = {RKNPU_T_CNA, 0x1110, "CNA", "DCOMP_ADDR0", SRC_ORK_ADDR, {{"ADDR", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 0] = {RKNPU_T_CNA, 0x1140, "CNA", "DCOMP_AMOUNT0", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 1] = {RKNPU_T_CNA, 0x1144, "CNA", "DCOMP_AMOUNT1", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 2] = {RKNPU_T_CNA, 0x1148, "CNA", "DCOMP_AMOUNT2", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 3] = {RKNPU_T_CNA, 0x114C, "CNA", "DCOMP_AMOUNT3", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 4] = {RKNPU_T_CNA, 0x1150, "CNA", "DCOMP_AMOUNT4", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 5] = {RKNPU_T_CNA, 0x1154, "CNA", "DCOMP_AMOUNT5", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 6] = {RKNPU_T_CNA, 0x1158, "CNA", "DCOMP_AMOUNT6", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 7] = {RKNPU_T_CNA, 0x115C, "CNA", "DCOMP_AMOUNT7", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 8] = {RKNPU_T_CNA, 0x1160, "CNA", "DCOMP_AMOUNT8", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 9] = {RKNPU_T_CNA, 0x1164, "CNA", "DCOMP_AMOUNT9", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 10] = {RKNPU_T_CNA, 0x1168, "CNA", "DCOMP_AMOUNT10", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 11] = {RKNPU_T_CNA, 0x116C, "CNA", "DCOMP_AMOUNT11", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 12] = {RKNPU_T_CNA, 0x1170, "CNA", "DCOMP_AMOUNT12", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 13] = {RKNPU_T_CNA, 0x1174, "CNA", "DCOMP_AMOUNT13", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 14] = {RKNPU_T_CNA, 0x1178, "CNA", "DCOMP_AMOUNT14", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CNA_DCOMP_AMOUNT0 + 15] = {RKNPU_T_CNA, 0x117C, "CNA", "DCOMP_AMOUNT15", SRC_ZERO, {{"VALUE", 0, 32}}},
    [RK_CORE_MISC_CFG] = {RKNPU_T_CORE, 0x3010, "CORE", "MISC_CFG", SRC_MTX, {{"QD_EN", 0, 1}, {"PROC_PRECISION", 8, 3}}},
    [RK_CORE_DATAOUT_SIZE_0] = {RKNPU_T_CORE, 0x3014, "CORE", "DATAOUT_SIZE_0", SRC_COUNT, {{"DATAOUT_WIDTH", 0, 16}, {"DATAOUT_HEIGHT", 16, 16}}},
    [RK_CORE_DATAOUT_SIZE_1] = {RKNPU_T_CORE, 0x3018, "CORE", "DATAOUT_SIZE_1", SRC_COUNT, {{"DATAOUT_CHANNEL", 0, 13}}},
    [RK_CORE_CLIP_TRUNCATE] = {RKNPU_T_CORE, 0x301C, "CORE", "CLIP_TRUNCATE", SRC_ZERO, {{"CLIP_TRUNCATE", 0, 5}}},
    [RK_CORE_3030] = {RKNPU_T_CORE, 0x3030, "CORE", "3030", SRC_UNDOC, {{"VALUE", 0, 32}}},
    [RK_DPU_FEATURE_MODE_CFG] = {RKNPU_T_DPU, 0x400C, "DPU", "FEATURE_MODE_CFG", SRC_MESA, {{"OUTPUT_MODE", 1, 2}, {"BURST_LEN", 5, 4}}},
    [RK_DPU_DATA_FORMAT] = {RKNPU_T_DPU, 0x4010, "DPU", "DATA_FORMAT", SRC_MTX, {{"PROC_PRECISION", 0, 3}, {"IN_PRECISION", 26, 3}, {"OUT_PRECISION", 29, 3}}},
    [RK_DPU_DST_BASE_ADDR] = {RKNPU_T_DPU, 0x4020, "DPU", "DST_BASE_ADDR", SRC_ORK_ADDR, {{"ADDR", 0, 32}}},
    [RK_DPU_DST_SURF_STRIDE] = {RKNPU_T_DPU, 0x4024, "DPU", "DST_SURF_STRIDE", SRC_QUIRKS, {{"DST_SURF_STRIDE", 4, 28}}},
    [RK_DPU_DATA_CUBE_WIDTH] = {RKNPU_T_DPU, 0x4030, "DPU", "DATA_CUBE_WIDTH", SRC_COUNT, {{"WIDTH", 0, 13}}},
    [RK_DPU_DATA_CUBE_HEIGHT] = {RKNPU_T_DPU, 0x4034, "DPU", "DATA_CUBE_HEIGHT", SRC_COUNT, {{"HEIGHT", 0, 13}}},
    [RK_DPU_DATA_CUBE_NOTCH_ADDR] = {RKNPU_T_DPU, 0x4038, "DPU", "DATA_CUBE_NOTCH_ADDR", SRC_NOTCH, {{"NOTCH_ADDR_0", 0, 13}, {"NOTCH_ADDR_1", 16, 13}}},
    [RK_DPU_DATA_CUBE_CHANNEL] = {RKNPU_T_DPU, 0x403C, "DPU", "DATA_CUBE_CHANNEL", SRC_COUNT, {{"CHANNEL", 0, 13}, {"ORIG_CHANNEL", 16, 13}}},
    [RK_DPU_BS_CFG] = {RKNPU_T_DPU, 0x4040, "DPU", "BS_CFG", SRC_BYPASS, {{"BYPASS", 0, 1}, {"ALU_BYPASS", 1, 1}, {"MUL_BYPASS", 4, 1}, {"RELU_BYPASS", 6, 1}}},
    [RK_DPU_BS_OW_CFG] = {RKNPU_T_DPU, 0x4050, "DPU", "BS_OW_CFG", SRC_MTX, {{"OD_BYPASS", 1, 1}, {"SIZE_E_0", 2, 3}, {"SIZE_E_1", 5, 3}, {"SIZE_E_2", 8, 3}}},
    [RK_DPU_WDMA_SIZE_0] = {RKNPU_T_DPU, 0x4058, "DPU", "WDMA_SIZE_0", SRC_COUNT, {{"CHANNEL_WDMA", 0, 13}}},
    [RK_DPU_WDMA_SIZE_1] = {RKNPU_T_DPU, 0x405C, "DPU", "WDMA_SIZE_1", SRC_COUNT, {{"WIDTH_WDMA", 0, 13}, {"HEIGHT_WDMA", 16, 13}}},
    [RK_DPU_BN_CFG] = {RKNPU_T_DPU, 0x4060, "DPU", "BN_CFG", SRC_BYPASS, {{"BYPASS", 0, 1}, {"ALU_BYPASS", 1, 1}, {"MUL_BYPASS", 4, 1}, {"RELU_BYPASS", 6, 1}}},
    [RK_DPU_EW_CFG] = {RKNPU_T_DPU, 0x4070, "DPU", "EW_CFG", SRC_BYPASS, {{"EW_BYPASS", 0, 1}, {"EW_OP_BYPASS", 1, 1}, {"EW_LUT_BYPASS", 7, 1}, {"EW_OP_CVT_BYPASS", 8, 1}, {"EW_RELU_BYPASS", 9, 1}}},
    [RK_DPU_OUT_CVT_OFFSET] = {RKNPU_T_DPU, 0x4080, "DPU", "OUT_CVT_OFFSET", SRC_CVT_ID, {{"OFFSET", 0, 32}}},
    [RK_DPU_OUT_CVT_SCALE] = {RKNPU_T_DPU, 0x4084, "DPU", "OUT_CVT_SCALE", SRC_CVT_ID, {{"SCALE", 0, 16}}},
    [RK_DPU_OUT_CVT_SHIFT] = {RKNPU_T_DPU, 0x4088, "DPU", "OUT_CVT_SHIFT", SRC_CVT_ID, {{"SHIFT", 0, 12}}},
    [RK_DPU_SURFACE_ADD] = {RKNPU_T_DPU, 0x40C0, "DPU", "SURFACE_ADD", SRC_MTX, {{"SURF_ADD", 4, 28}}},
    [RK_DPU_40C4] = {RKNPU_T_DPU, 0x40C4, "DPU", "40C4", SRC_UNDOC, {{"VALUE", 0, 32}}},
    [RK_RDMA_DATA_CUBE_WIDTH] = {RKNPU_T_RDMA, 0x500C, "RDMA", "DATA_CUBE_WIDTH", SRC_MESA_RDMA, {{"WIDTH", 0, 13}}},
};

static uint32_t field_mask(const struct rknpu_field *f) {
    uint32_t m = f->bits >= 32 ? 0xffffffffu : ((1u << f->bits) - 1u);
    return m << f->lo;
}

int rknpu_value(enum rknpu_reg_id r, const uint32_t *fields, int n, uint32_t *value, int *bad) {
    uint32_t v = 0;
    for (int i = 0; i < n && i < RKNPU_MAX_FIELDS; i++) {
        const struct rknpu_field *f = &rknpu_regs[r].fields[i];
        uint32_t max = f->bits >= 32 ? 0xffffffffu : ((1u << f->bits) - 1u);
        if (!f->name || fields[i] > max) {
            if (bad) *bad = i;
            return -1;
        }
        v |= fields[i] << f->lo;
    }
    *value = v;
    return 0;
}

uint32_t rknpu_field_get(enum rknpu_reg_id r, int i, uint32_t value) {
    const struct rknpu_field *f = &rknpu_regs[r].fields[i];
    return (value & field_mask(f)) >> f->lo;
}

uint32_t rknpu_reserved_bits(enum rknpu_reg_id r, uint32_t value) {
    uint32_t named = 0;
    for (int i = 0; i < RKNPU_MAX_FIELDS && rknpu_regs[r].fields[i].name; i++) named |= field_mask(&rknpu_regs[r].fields[i]);
    return value & ~named;
}

int rknpu_reg_find(uint16_t target, uint16_t addr) {
    for (int r = 0; r < RKNPU_N_REGS; r++)
        if (rknpu_regs[r].target == target && rknpu_regs[r].addr == addr) return r;
    return -1;
}

int rknpu_decode_word(uint64_t w, char *out, size_t n) {
    uint16_t target = rknpu_word_target(w), reg = rknpu_word_reg(w);
    uint32_t value = rknpu_word_value(w);
    if (w == 0) return snprintf(out, n, "(zero word: padding)");
    if (target == RKNPU_T_PC_OP40) return snprintf(out, n, "PC.OP_40 = 0x%08x (set before the enable)", value);
    int r = rknpu_reg_find(target, reg);
    if (r < 0) return snprintf(out, n, "target 0x%04x reg 0x%04x = 0x%08x (not in the table)", target, reg, value);
    const struct rknpu_reg *d = &rknpu_regs[r];
    int len = snprintf(out, n, "%s.%s = 0x%08x (", d->block, d->name, value);
    for (int i = 0; i < RKNPU_MAX_FIELDS && d->fields[i].name; i++) {
        size_t at = len < 0 ? 0 : (size_t)len < n ? (size_t)len : n;
        len += snprintf(out + at, n - at, "%s%s=%u", i ? " " : "", d->fields[i].name,
                        rknpu_field_get((enum rknpu_reg_id)r, i, value));
    }
    uint32_t reserved = rknpu_reserved_bits((enum rknpu_reg_id)r, value);
    size_t at = len < 0 ? 0 : (size_t)len < n ? (size_t)len : n;
    if (reserved) len += snprintf(out + at, n - at, " reserved=0x%08x)", reserved);
    else len += snprintf(out + at, n - at, ")");
    return len;
}
