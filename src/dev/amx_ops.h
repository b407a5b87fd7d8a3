/* Every AMX instruction dev_amx.c executes, in one place: the 64-byte tile
 * configuration and its load, tile release, zero, load, store and TDPBSSD.
 *
 * Normal builds write each as one inline asm statement, with its memory
 * effects spelled out: GCC 12 declares _tile_loadconfig's operand as 8 bytes
 * (so the stores filling the configuration can be dropped as dead) and its
 * _tile_loadd/_tile_stored carry no memory effects at all. Tile numbers are
 * part of the instruction, hence macros.
 *
 * Emulation builds (cmake -DMOEX_EMULATE_AMX=ON defines MOEX_EMULATED_AMX)
 * run them as plain C over a model of the tile registers (tests/emu/amx_emu.c),
 * so that the backend is tested on CPUs without AMX. */
#ifndef MOEX_AMX_OPS_H
#define MOEX_AMX_OPS_H

#include <stdint.h>

/* The tile configuration, palette 1 (Intel SDM, LDTILECFG). */
struct amx_tile_config {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile t */
    uint8_t rows[16];
};
_Static_assert(sizeof(struct amx_tile_config) == 64, "the tile configuration is 64 bytes");

#if defined(MOEX_EMULATED_AMX)

#include "amx_emu.h" /* tests/emu */

#define AMX_CONFIG_LOAD(cfg) amx_emu_ldtilecfg(cfg)
#define AMX_RELEASE() amx_emu_tilerelease()
#define AMX_TILE_ZERO(t) amx_emu_tilezero(t)
#define AMX_TILE_LOAD(t, base, stride) amx_emu_tileloadd(t, base, (long)(stride))
#define AMX_TILE_STORE(t, base, stride) amx_emu_tilestored(t, base, (long)(stride))
#define AMX_DPBSSD(c, a, b) amx_emu_tdpbssd(c, a, b)

#else

/* The memory operand is the whole struct, so all 64 bytes are stored first. */
#define AMX_CONFIG_LOAD(cfg) \
    __asm__ volatile("ldtilecfg %0" : : "m"(*(const struct amx_tile_config *)(cfg)) : "memory")
#define AMX_RELEASE() __asm__ volatile("tilerelease" ::: "memory")
#define AMX_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
/* Rows of the tile's colsb bytes from base, base + stride, ... */
#define AMX_TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t : : "r"((const void *)(base)), "r"((long)(stride)) : "memory")
#define AMX_TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" : : "r"((void *)(base)), "r"((long)(stride)) : "memory")
/* tmm c += tmm a . tmm b, int8 x int8 -> int32 (AT&T order: b, a, c) */
#define AMX_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

#endif

#endif
