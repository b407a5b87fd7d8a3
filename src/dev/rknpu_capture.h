/* Golden captures: one NPU submit as recorded (on a board by
 * bench/rknpu-check.sh, or on the fake), to be replayed on the
 * register-level model, which must write the very bytes the device wrote.
 *
 * File: "MOEXNPU1", u32 chained (the programs follow the PC chain; else each
 * is its own task), u32 programs, u32 regions, u32 0; then each region: u32
 * kind, u32 NPU VA, u64 bytes, the bytes. The programs region comes first,
 * the output region holds the device's results. Little-endian. */
#ifndef MOEX_RKNPU_CAPTURE_H
#define MOEX_RKNPU_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

enum { RKNPU_CAP_PROGRAMS = 1, RKNPU_CAP_FEATURES = 2, RKNPU_CAP_WEIGHTS = 3, RKNPU_CAP_OUTPUT = 4 };

struct rknpu_capture_region {
    uint32_t kind, va;
    uint64_t bytes;
    const void *data;
};

/* Writes a capture; 0, or -1 with errno. */
int rknpu_capture_write(const char *path, bool chained, int programs, const struct rknpu_capture_region *r, int n);

/* Replays a capture file on the model: 0 when it runs and writes exactly the
 * recorded output; else -1 with the reason in moex_error() (a refusal by
 * name, or the first differing byte). */
int rknpu_capture_replay(const char *path);

#endif
