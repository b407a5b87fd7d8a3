/* Internal to src/pack (and the fuzz target; the magic is core/file_magic.h's,
 * which the GGUF reader knows too): the byte layout of pack files,
 * version 3, as docs/pack-format.md specifies it. One place per offset. */
#ifndef MOEX_PACKFILE_FORMAT_H
#define MOEX_PACKFILE_FORMAT_H

#include "core/file_magic.h"

#include <stdint.h>
#include <string.h>

#define PF_MAGIC MOEX_PACK_MAGIC
#define PF_MAGIC_BYTES MOEX_PACK_MAGIC_BYTES
#define PF_VERSION 3u
#define PF_HEADER_BYTES 512u
#define PF_ALIGN 4096u             /* what the writer uses */
#define PF_ALIGN_MIN 64u           /* what a reader accepts: a power of two in [MIN, MAX] */
#define PF_ALIGN_MAX (1u << 20)
#define PF_FORMAT_W8A8 1u          /* int8 codes, one f32 scale per output channel */
#define PF_SECTIONS 5u
#define PF_ENTRY_BYTES 64u
#define PF_STRIDE_ALIGN 64u        /* code and scale strides are multiples of this */
#define PF_FLAG_ALL 1u
#define PF_FLAG_NO_DEVICE 2u       /* no device experts: the CPU's interleaved layout only */
#define PF_HOST_ENTRY_BYTES 64u

enum pf_section { PF_PLAN = 1, PF_INDEX = 2, PF_DATA = 3, PF_HOST_DATA = 4, PF_HOST_INDEX = 5 };

/* Header fields: byte offsets. */
enum {
    PF_H_MAGIC = 0,
    PF_H_VERSION = 8,
    PF_H_HEADER_BYTES = 12,
    PF_H_FILE_SIZE = 16,
    PF_H_ALIGN = 24,
    PF_H_N_SECTIONS = 28,
    PF_H_LAYOUT = 32,
    PF_H_FORMAT = 36,
    PF_H_K_MULTIPLE = 40,
    PF_H_N_MULTIPLE = 44,
    PF_H_SLOT_VALUES = 48,
    PF_H_SLOT_MAX_N = 56,
    PF_H_SCALE_STRIDE = 60,  /* bytes between entries' scales */
    PF_H_DEVICE = 64,        /* 16 bytes, NUL-padded */
    PF_H_GGUF_SIZE = 80,
    PF_H_GGUF_HASH = 88,
    PF_H_N_LAYERS = 96,
    PF_H_N_EXPERT = 100,
    PF_H_N_EMBD = 104,
    PF_H_N_FF = 108,
    PF_H_SOURCE_TYPES = 112, /* 3 x u32: gate, up, down */
    PF_H_BUDGET = 128,
    PF_H_EXPERT_BYTES = 136,
    PF_H_STATS_HASH = 144,
    PF_H_PINNED_SHARE = 152, /* f64 */
    PF_H_PLAN_SLOTS = 160,
    PF_H_N_PINNED = 164,
    PF_H_N_ENTRIES = 168,
    PF_H_FLAGS = 172,
    PF_H_CODE_STRIDE = 176,  /* bytes between entries' codes: the device slot stride */
    PF_H_SECTIONS = 192,     /* PF_SECTIONS x 32 bytes: kind u32, 0 u32, offset, size, checksum */
    PF_H_N_HOST = 352,       /* entries of the host index: matrices in the CPU's interleaved layout */
    PF_H_GGUF_MTIME = 360,   /* u64: the GGUF's modification time, ns since 1970 */
    PF_H_GGUF_INODE = 368,   /* u64: the GGUF's inode */
    PF_H_RESERVED = 376,     /* to the checksum: 0 */
    PF_H_CHECKSUM = 504,     /* XXH64 of bytes [0, 504) */
};
#define PF_SECTION_BYTES 32u

/* Index entry fields: byte offsets. */
enum {
    PF_E_LAYER = 0,
    PF_E_EXPERT = 4,
    PF_E_MATRIX = 8,
    PF_E_SOURCE_TYPE = 12,
    PF_E_K = 16,
    PF_E_N = 20,
    PF_E_CODES_OFFSET = 24,
    PF_E_CODES_BYTES = 32,
    PF_E_SCALES_OFFSET = 40,
    PF_E_SCALES_BYTES = 48,
    PF_E_CHECKSUM = 56,
};

/* Host index entry fields (a matrix in the CPU's interleaved layout). */
enum {
    PF_X_SOURCE_OFFSET = 0,  /* u64: the matrix's first byte in the GGUF */
    PF_X_SOURCE_TYPE = 8,
    PF_X_VARIANT = 12,       /* quant_r16_variant of the layout */
    PF_X_ROWS = 16,
    PF_X_COLS = 24,
    PF_X_OFFSET = 32,
    PF_X_BYTES = 40,
    PF_X_CHECKSUM = 48,
    PF_X_RESERVED = 56,
};

/* Little-endian fields, whatever the host. */
static inline uint32_t pf_get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t pf_get64(const uint8_t *p) { return (uint64_t)pf_get32(p) | (uint64_t)pf_get32(p + 4) << 32; }
static inline void pf_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void pf_put64(uint8_t *p, uint64_t v) {
    pf_put32(p, (uint32_t)v);
    pf_put32(p + 4, (uint32_t)(v >> 32));
}
static inline double pf_get_f64(const uint8_t *p) {
    uint64_t bits = pf_get64(p);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}
static inline void pf_put_f64(uint8_t *p, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pf_put64(p, bits);
}

#endif
