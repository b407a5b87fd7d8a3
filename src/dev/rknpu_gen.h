/* The program generator, driver-neutral: a W8A8 matmul C[M][N] = A[M][K] x
 * B[K][N] as 1x1-convolution programs (width 1, height M, channels K,
 * kernels N; RKNPU.md 4, 6), one program per (N-slice, K-slice, M-tile).
 *
 *   feature  A as the cube [K/16][Mp][16] int8, Mp = rknpu_rows(M) (rows
 *            past M zero): a K-slice starts k0 * Mp bytes in, an M-tile
 *            m0 * 16 bytes in; surfaces are Mp * 16 bytes apart
 *   weights  B in PACK_RKNPU (pack_rknpu.h), one buffer per (N-slice, K-slice)
 *   output   one int32 cube [N/4][Mp][4] per K-slice (Mp * N * 4 bytes each,
 *            one after the other): the NPU does not accumulate across
 *            K-slices, the host sums the partials exactly in int32
 *            (exact for K < 2^31 / 2^14; RKNPU.md 6) and applies the
 *            per-row and per-channel scales
 *
 * Each program is RKNPU_PROGRAM_WORDS words: the CNA, CORE and DPU blocks
 * (RKNPU.md 6's smallest program, DPU_RDMA left out of the enable bitmap),
 * a zero word, and the trailer (next program's address, its length, the
 * OP_40 word, OPERATION_ENABLE). rknpu_stream_link chains the programs of a
 * stream (the PC follows the trailer's address), or leaves each alone. */
#ifndef MOEX_RKNPU_GEN_H
#define MOEX_RKNPU_GEN_H

#include "dev/rknpu_regs.h"
#include "pack/pack_rknpu.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RKNPU_CBUF_BANKS 12         /* Mesa rkt_ml.h, RKNPU.md 2 */
#define RKNPU_CBUF_BANK_BYTES 32768 /* 256 entries of 128 B */
#define RKNPU_PROGRAM_WORDS 78      /* 73 registers, a zero word, the 4-word trailer */
#define RKNPU_TRAILER_WORDS 4
#define RKNPU_FEATURE_ATOM 16       /* bytes: the feature cube's innermost channels */
#define RKNPU_MAX_K 65536           /* int32 partial sums stay exact well below 131072 */

/* Rows of the feature and output cubes for M rows: M = 1 as is, else a
 * multiple of 4 (M % 4 != 0 computes garbage, RKNPU.md 5.7). */
int rknpu_rows(int M);
/* The largest M-tile for a K-slice of kc inputs: the CBUF budget (data banks
 * ceil(Mt * kc / 32 KiB) + 1 plus at least one weight bank within 12), the
 * measured ceilings of ork-driver's 0x1040 schedule (704 @ K512, 320 @ K1024,
 * 128 @ K2048, 64 beyond; RKNPU.md 8) and the 10-bit FEATURE_GRAINS, rounded
 * down to a multiple of 4. */
int rknpu_m_tile(int kc);
int rknpu_k_slices(int K);
int rknpu_n_slices(int N);
/* Programs of one M x K x N matmul. */
int rknpu_program_count(int M, int K, int N);
/* Bytes of its feature cube and of its output partials. */
uint64_t rknpu_feature_bytes(int M, int K);
uint64_t rknpu_output_bytes(int M, int K, int N);

/* One matmul as the NPU sees it: the NPU VAs of its three operands. */
struct rknpu_matmul {
    int M, K, N;
    uint32_t feature, weights, output;
};

/* A command stream under construction: words[0] lies at NPU VA `base`. */
struct rknpu_stream {
    uint64_t *words;
    size_t cap, n; /* words */
    uint32_t base;
    int programs;
};

/* Appends the matmul's programs. 0, or -1 with moex_error naming the refusal
 * (a shape outside the envelope, a value that would wrap its field, an
 * address that is not 16-byte aligned, no room in the stream). */
int rknpu_emit_matmul(struct rknpu_stream *s, const struct rknpu_matmul *mm);
/* Writes every trailer: chained, program i names program i + 1 (the last
 * names none); unchained, none names another. */
void rknpu_stream_link(struct rknpu_stream *s, bool chain);
/* PC_REGISTER_AMOUNTS for a program of `words` words (trailer included), the
 * rocket kernel's (count + 1) / 2 - 1 (RKNPU.md 1); and the vendor kernel's
 * regcfg_amount, which leaves the trailer out (RKNPU.md 3). */
uint32_t rknpu_amount(size_t words);
uint32_t rknpu_regcfg_amount(size_t words);

/* Writes rows [0, M) of an int8 [M][K] matrix (rows `stride` bytes apart)
 * into a feature cube, zeroing rows [M, Mp). */
void rknpu_feature_fill(int8_t *cube, const int8_t *a, size_t stride, int M, int K);
/* The exact int32 result C[m][n] of output partials (sum over K-slices). */
static inline int32_t rknpu_output_at(const int32_t *partials, int M, int K, int N, int m, int n) {
    int mp = rknpu_rows(M), sk = rknpu_k_slices(K);
    size_t at = ((size_t)(n / 4) * (size_t)mp + (size_t)m) * 4 + (size_t)(n % 4), step = (size_t)mp * (size_t)N;
    uint32_t acc = 0;
    for (int s = 0; s < sk; s++) acc += (uint32_t)partials[at + (size_t)s * step];
    return (int32_t)acc;
}

/* What a board pays for programs: the generator's own count, the one the
 * register-level model counts when it runs them and the one sim prices. */
struct rknpu_cost {
    uint64_t submits, tasks, words;
    uint64_t feature_bytes, weight_bytes, output_bytes; /* read, read, written, over all tasks */
};
/* Adds one matmul's tasks (not its submit). */
void rknpu_cost_matmul(struct rknpu_cost *c, int M, int K, int N);

/* A batch of jobs split into submits as the backend does it: the jobs of
 * one weight buffer go together (a chain may read one weight buffer, RKNPU.md
 * 8 P15), in the order their buffers first appear, and a submit ends where
 * its feature cubes, output partials or programs would overflow the scratch
 * limits. Job j goes to submit submit_of[j]; order[] lists the jobs submit
 * by submit. Returns the number of submits, or -1 when one job alone does not
 * fit the limits. */
struct rknpu_job_shape {
    int M, K, N;
    int buffer; /* which weight buffer (BO) holds the job's weight */
};
struct rknpu_limits {
    uint64_t feature_bytes, output_bytes, program_words;
};
/* The limits of a window's scratch of `scratch` bytes (the device and the
 * sim's mode=programs both cut submits by them). */
struct rknpu_limits rknpu_limits_for(uint64_t scratch);
int rknpu_batch_plan(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim, int *submit_of,
                     int *order);
/* The whole batch's cost: its submits, tasks, words and bytes. -1 as above. */
int rknpu_batch_cost(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim, struct rknpu_cost *c);
/* The same task by task, in the order the device runs them: up to max
 * entries into tasks (NULL: count only); the number of tasks, or -1. */
struct rknpu_task_cost {
    int submit, job;                      /* which submit, which job of the batch */
    int mt, kc, nc;                       /* the tile: rows, inputs, outputs */
    uint32_t words;
    uint64_t feature_bytes, weight_bytes, output_bytes;
};
int rknpu_batch_tasks(const struct rknpu_job_shape *jobs, int n, const struct rknpu_limits *lim,
                      struct rknpu_task_cost *tasks, int max);

#endif
