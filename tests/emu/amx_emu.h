/* MOEX_EMULATE_AMX builds only (see CMakeLists.txt): a plain C model of the
 * AMX tile unit that src/dev/amx_ops.h calls instead of the instructions,
 * so that dev_amx.c runs, and is tested, on CPUs without AMX.
 *
 * Like the hardware, every thread has its own state: a configuration
 * (palette 1: 8 tiles of up to 16 rows x 64 bytes) and 8 tile registers.
 * The configuration is read from the 64 bytes in memory as the SDM lays
 * them out, not through moex's struct. The checks LDTILECFG and the tile
 * instructions make (#GP, #UD) are made here, and a failed one stops the
 * process with a message, as the CPU's exception would. Memory is read and
 * written through the given addresses, so AddressSanitizer sees every tile
 * load and store. Never used by a normal build. */
#ifndef MOEX_AMX_EMU_H
#define MOEX_AMX_EMU_H

#include <stdint.h>

void amx_emu_ldtilecfg(const void *config); /* 64 bytes */
void amx_emu_tilerelease(void);
void amx_emu_tilezero(int tile);
void amx_emu_tileloadd(int tile, const void *base, long stride);
void amx_emu_tilestored(int tile, void *base, long stride);
/* dst += src1 . src2: signed bytes, int32 dwords (TDPBSSD) */
void amx_emu_tdpbssd(int dst, int src1, int src2);

/* For tests: whether the calling thread holds a tile configuration, and
 * process-wide counts of instructions executed so far. */
int amx_emu_configured(void);
struct amx_emu_counts {
    uint64_t configs, releases, zeros, loads, stores, dpbssd;
};
void amx_emu_get_counts(struct amx_emu_counts *c);

#endif
