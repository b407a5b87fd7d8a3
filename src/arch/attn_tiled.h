/* Causal attention of runs of consecutive tokens against their sequence's
 * KV cache, tiled (flash-style): per (block of a run's tokens, KV head), the
 * query heads of that KV group for those tokens meet the keys and values in
 * blocks small enough to stay in L1/L2, under an online softmax (running
 * maximum and sum, accumulators rescaled), so no row of scores over the
 * whole cache is ever held. A token's output does not depend on which other
 * tokens share its run or its block: a run evaluated at once equals the
 * same tokens evaluated one at a time, bit for bit. */
#ifndef MOEX_ATTN_TILED_H
#define MOEX_ATTN_TILED_H

#include <stddef.h>

struct attn_kernels;
struct threadpool;

/* n consecutive tokens of one sequence, at positions pos0..pos0+n-1, whose
 * keys and values are already in the sequence's cache. */
struct attn_run {
    const float *q;    /* (n, n_head*head_dim) the tokens' queries, normalised and rotated */
    float *out;        /* (n, n_head*head_dim) */
    int n, pos0;
    const void *k, *v; /* the sequence's cache: position p's (n_head_kv*head_dim) row at p*kv_stride */
    size_t kv_stride;  /* elements from one position's row to the next */
    size_t kv_elem;    /* 2 (f16) or 4 (f32) */
};

/* Per-thread tiles for one attention shape, over caches of up to n_ctx
 * positions (the tiles' size is bounded whatever n_ctx; runs may go
 * further, at some cost). NULL when out of memory. */
struct attn_tiles;
struct attn_tiles *attn_tiles_new(int n_head, int n_head_kv, int head_dim, int n_ctx, int threads);
void attn_tiles_free(struct attn_tiles *t);

/* Every run's outputs, all runs in one parallel region of pool (NULL:
 * serial); ak NULL: the kernels of this CPU (attn_kernels()). */
void attn_tiled(struct threadpool *pool, const struct attn_kernels *ak, struct attn_tiles *t, const struct attn_run *runs,
                int n_runs);

/* What a run's new tokens need before they attend, done inside the same
 * parallel region: queries(run, g, t0, nt) readies the queries of KV group
 * g for the run's tokens t0..t0+nt-1 (each called once, by the item that
 * reads them); keys(run, g, t0, nt) puts those tokens' keys and values of
 * KV head g into the cache (each called once, by the first item that needs
 * them, while any other item that needs them waits). */
struct attn_prepare {
    void (*queries)(void *ctx, int run, int g, int t0, int nt);
    void (*keys)(void *ctx, int run, int g, int t0, int nt);
    void *ctx;
    /* Optional: called once per (run, g, t0, nt) of outputs, by the item
     * that wrote them, as soon as they are final (e.g. to quantize them
     * for the next matmul while they are in cache). */
    void (*outputs)(void *ctx, int run, int g, int t0, int nt);
};

/* Runs one call of attn_tiled_prepared takes at most. */
enum { ATTN_RUNS_MAX = 64 };

/* attn_tiled whose runs' new keys and values are not yet in the cache and
 * whose queries are not yet ready: prep makes them so as the items go. */
void attn_tiled_prepared(struct threadpool *pool, const struct attn_kernels *ak, struct attn_tiles *t,
                         const struct attn_run *runs, int n_runs, const struct attn_prepare *prep);

#endif
