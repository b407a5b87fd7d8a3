/* The AMX tile unit in plain C (see amx_emu.h). Semantics and checks follow
 * the Intel SDM for LDTILECFG, TILERELEASE, TILEZERO, TILELOADD, TILESTORED
 * and TDPBSSD with palette 1. A failed check is the instruction's exception:
 * this file stands in for the CPU, so it stops the process (abort) where
 * the hardware would raise #GP or #UD. */
#include "amx_emu.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Palette 1 (CPUID leaf 0x1D, subleaf 1 on Sapphire Rapids). */
enum { MAX_NAMES = 8, MAX_ROWS = 16, BYTES_PER_ROW = 64, TMUL_MAXK = 16, TMUL_MAXN_BYTES = 64 };

struct tile_unit {
    bool configured;
    int start_row;
    int rows[MAX_NAMES], colsb[MAX_NAMES];
    uint8_t data[MAX_NAMES][MAX_ROWS][BYTES_PER_ROW];
};

static _Thread_local struct tile_unit unit;

static _Atomic uint64_t n_configs, n_releases, n_zeros, n_loads, n_stores, n_dpbssd;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3), noreturn))
#endif
static void fault(const char *exception, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "amx emulation: %s: ", exception);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

/* Code must not count on what the tiles hold after LDTILECFG: fill them
 * with a pattern, so that an accumulator used without TILEZERO shows. */
static void scribble_all(void) {
    memset(unit.data, 0xa5, sizeof unit.data);
}

void amx_emu_ldtilecfg(const void *config) {
    const uint8_t *b = config;
    atomic_fetch_add_explicit(&n_configs, 1, memory_order_relaxed);
    if (b[0] > 1) fault("#GP", "ldtilecfg: palette %d (palettes 0 and 1 exist)", b[0]);
    if (b[0] == 0) { /* the init state: no configuration, tiles zero */
        memset(&unit, 0, sizeof unit);
        return;
    }
    for (int i = 2; i < 16; i++)
        if (b[i]) fault("#GP", "ldtilecfg: reserved byte %d is %d", i, b[i]);
    for (int i = 32; i < 48; i++)
        if (b[i]) fault("#GP", "ldtilecfg: byte %d (colsb of tile %d > 7) is %d", i, (i - 16) / 2, b[i]);
    for (int i = 56; i < 64; i++)
        if (b[i]) fault("#GP", "ldtilecfg: byte %d (rows of tile %d > 7) is %d", i, i - 48, b[i]);
    for (int t = 0; t < MAX_NAMES; t++) {
        int colsb = b[16 + 2 * t] | b[17 + 2 * t] << 8, rows = b[48 + t];
        if (rows > MAX_ROWS || colsb > BYTES_PER_ROW)
            fault("#GP", "ldtilecfg: tile %d of %d rows x %d bytes (at most %d x %d)", t, rows, colsb, MAX_ROWS,
                  BYTES_PER_ROW);
        if ((rows == 0) != (colsb == 0))
            fault("#GP", "ldtilecfg: tile %d half configured (%d rows x %d bytes)", t, rows, colsb);
        unit.rows[t] = rows;
        unit.colsb[t] = colsb;
    }
    /* start_row is for restarting an interrupted load or store; moex never
     * does, and every tile instruction would start from it. */
    if (b[1]) fault("#GP", "ldtilecfg: start_row %d (moex never restarts a tile instruction)", b[1]);
    unit.start_row = 0;
    unit.configured = true;
    scribble_all();
}

void amx_emu_tilerelease(void) {
    atomic_fetch_add_explicit(&n_releases, 1, memory_order_relaxed);
    memset(&unit, 0, sizeof unit);
}

/* #UD unless the tiles are configured and t names a configured tile. */
static void check_tile(const char *insn, int t) {
    if (!unit.configured) fault("#UD", "%s with no tile configuration loaded on this thread", insn);
    if (t < 0 || t >= MAX_NAMES) fault("#UD", "%s: tmm%d (palette 1 has tmm0-7)", insn, t);
    if (unit.rows[t] == 0) fault("#UD", "%s: tmm%d is not configured", insn, t);
}

void amx_emu_tilezero(int t) {
    check_tile("tilezero", t);
    atomic_fetch_add_explicit(&n_zeros, 1, memory_order_relaxed);
    memset(unit.data[t], 0, sizeof unit.data[t]);
}

void amx_emu_tileloadd(int t, const void *base, long stride) {
    check_tile("tileloadd", t);
    atomic_fetch_add_explicit(&n_loads, 1, memory_order_relaxed);
    const char *p = base;
    memset(unit.data[t], 0, sizeof unit.data[t]); /* rows and bytes past the shape are zeroed */
    for (int r = 0; r < unit.rows[t]; r++) memcpy(unit.data[t][r], p + (long)r * stride, (size_t)unit.colsb[t]);
}

void amx_emu_tilestored(int t, void *base, long stride) {
    check_tile("tilestored", t);
    atomic_fetch_add_explicit(&n_stores, 1, memory_order_relaxed);
    char *p = base;
    for (int r = 0; r < unit.rows[t]; r++) memcpy(p + (long)r * stride, unit.data[t][r], (size_t)unit.colsb[t]);
}

void amx_emu_tdpbssd(int dst, int src1, int src2) {
    check_tile("tdpbssd", dst);
    check_tile("tdpbssd", src1);
    check_tile("tdpbssd", src2);
    if (dst == src1 || dst == src2 || src1 == src2)
        fault("#UD", "tdpbssd tmm%d, tmm%d, tmm%d: the three tiles must differ", dst, src1, src2);
    const int M = unit.rows[dst], N = unit.colsb[dst] / 4, K = unit.colsb[src1] / 4;
    if (unit.colsb[dst] % 4 || unit.colsb[src1] % 4 || unit.colsb[src2] % 4)
        fault("#UD", "tdpbssd: colsb %d, %d, %d not whole dwords", unit.colsb[dst], unit.colsb[src1],
              unit.colsb[src2]);
    if (unit.rows[src1] != M) fault("#UD", "tdpbssd: A has %d rows, C %d", unit.rows[src1], M);
    if (unit.rows[src2] != K) fault("#UD", "tdpbssd: B has %d rows, A %d dwords per row", unit.rows[src2], K);
    if (unit.colsb[src2] != unit.colsb[dst])
        fault("#UD", "tdpbssd: B rows of %d bytes, C rows of %d", unit.colsb[src2], unit.colsb[dst]);
    if (K > TMUL_MAXK || unit.colsb[dst] > TMUL_MAXN_BYTES) fault("#UD", "tdpbssd: K %d or N %d too large", K, N);
    atomic_fetch_add_explicit(&n_dpbssd, 1, memory_order_relaxed);
    const uint8_t(*A)[BYTES_PER_ROW] = unit.data[src1];
    const uint8_t(*B)[BYTES_PER_ROW] = unit.data[src2];
    uint8_t(*C)[BYTES_PER_ROW] = unit.data[dst];
    for (int m = 0; m < M; m++) {
        /* int32 sums wrap around as the hardware's do: add in uint32 */
        uint32_t acc[BYTES_PER_ROW / 4];
        memcpy(acc, C[m], sizeof acc);
        for (int k = 0; k < K; k++) {
            const int32_t a0 = (int8_t)A[m][4 * k], a1 = (int8_t)A[m][4 * k + 1], a2 = (int8_t)A[m][4 * k + 2],
                          a3 = (int8_t)A[m][4 * k + 3];
            const uint8_t *b = B[k];
            for (int n = 0; n < N; n++)
                acc[n] += (uint32_t)(a0 * (int8_t)b[4 * n]) + (uint32_t)(a1 * (int8_t)b[4 * n + 1]) +
                          (uint32_t)(a2 * (int8_t)b[4 * n + 2]) + (uint32_t)(a3 * (int8_t)b[4 * n + 3]);
        }
        /* the row past N dwords, and rows past M, are zeroed */
        memset(C[m], 0, BYTES_PER_ROW);
        memcpy(C[m], acc, (size_t)N * 4);
    }
    for (int m = M; m < MAX_ROWS; m++) memset(C[m], 0, BYTES_PER_ROW);
}

int amx_emu_configured(void) { return unit.configured; }

void amx_emu_get_counts(struct amx_emu_counts *c) {
    c->configs = atomic_load(&n_configs);
    c->releases = atomic_load(&n_releases);
    c->zeros = atomic_load(&n_zeros);
    c->loads = atomic_load(&n_loads);
    c->stores = atomic_load(&n_stores);
    c->dpbssd = atomic_load(&n_dpbssd);
}
