/* Packing a whole weight: the row kernel for the type, the layout writer,
 * and the split of rows over the thread pool. */
#include "pack/pack.h"

#include "core/threadpool.h"
#include "pack/pack_impl.h"
#include "pack/pack_rknpu.h"

#include <stdatomic.h>
#include <string.h>

size_t pack_bytes(enum pack_layout layout, int K, int N) {
    (void)layout; /* both layouts hold exactly K * N codes */
    if (K <= 0 || N <= 0) return 0;
    return (size_t)K * (size_t)N;
}

int pack_check_shape(enum pack_layout layout, int K, int N) {
    if (K <= 0 || N <= 0 || K > PACK_MAX_K) return PACK_E_SHAPE;
    if (layout == PACK_AMX && (K % 64 || N % 16)) return PACK_E_SHAPE;
    if (layout == PACK_RKNPU && (K % PACK_RKNPU_TILE || N % PACK_RKNPU_TILE)) return PACK_E_SHAPE;
    return PACK_OK;
}

typedef int (*row_fn)(const void *row, int K, int8_t *q, float *scale);

/* The fused AVX2 row kernel of t, or NULL. */
static row_fn fused_avx2(enum qtype t) {
#if defined(__x86_64__)
    if (!pack_avx2_enabled()) return NULL;
    switch (t) {
    case QT_Q4_K: return pack_row_q4_K_avx2;
    case QT_Q5_K: return pack_row_q5_K_avx2;
    case QT_Q6_K: return pack_row_q6_K_avx2;
    case QT_Q8_0: return pack_row_q8_0_avx2;
    case QT_F16: return pack_row_f16_avx2;
    case QT_BF16: return pack_row_bf16_avx2;
    default: return NULL;
    }
#else
    (void)t;
    return NULL;
#endif
}

static row_fn fused_neon(enum qtype t) {
#if defined(__aarch64__)
    if (pack_neon_enabled() && t == QT_Q4_K) return pack_row_q4_K_neon;
#endif
    (void)t;
    return NULL;
}

static row_fn fused_scalar(enum qtype t) {
    switch (t) {
    case QT_Q4_K: return pack_row_q4_K_scalar;
    case QT_Q5_K: return pack_row_q5_K_scalar;
    case QT_Q6_K: return pack_row_q6_K_scalar;
    case QT_Q8_0: return pack_row_q8_0_scalar;
    case QT_Q5_0: return pack_row_q5_0_scalar;
    default: return NULL;
    }
}

int pack_row(enum pack_path path, enum qtype t, const void *row, int K, int8_t *q, float *scale) {
    if (K > PACK_MAX_K) return PACK_E_SHAPE;
    row_fn avx2 = fused_avx2(t), neon = fused_neon(t), scalar = fused_scalar(t);
    switch (path) {
    case PACK_PATH_BEST:
        if (avx2) return avx2(row, K, q, scale);
        if (neon) return neon(row, K, q, scale);
        if (scalar) return scalar(row, K, q, scale);
        return pack_row_generic(t, row, K, q, scale);
    case PACK_PATH_GENERIC:
        return pack_row_generic(t, row, K, q, scale);
    case PACK_PATH_FUSED_SCALAR:
        return scalar ? scalar(row, K, q, scale) : PACK_E_TYPE;
    case PACK_PATH_FUSED_AVX2:
        return avx2 ? avx2(row, K, q, scale) : PACK_E_TYPE;
    case PACK_PATH_FUSED_NEON:
        return neon ? neon(row, K, q, scale) : PACK_E_TYPE;
    }
    return PACK_E_TYPE;
}

/* Row n's codes into the AMX tiles: one 4-byte group per tile row. */
static void scatter_amx(const int8_t *q, int K, int n, int8_t *codes) {
    const size_t k_tiles = (size_t)K / 64;
    int8_t *tile_col = codes + ((size_t)(n / 16) * k_tiles) * 1024 + (size_t)(n % 16) * 4;
    for (int g = 0; g < K / 4; g++) {
        int8_t *dst = tile_col + (size_t)(g / 16) * 1024 + (size_t)(g % 16) * 64;
        memcpy(dst, q + 4 * g, 4);
    }
}

struct matrix_job {
    enum pack_path path;
    enum qtype t;
    const char *src;
    size_t row_bytes;
    int K, N;
    enum pack_layout layout;
    int8_t *codes;
    float *scales;
    _Atomic int status;
};

static void pack_rows(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct matrix_job *j = arg;
    int8_t row_codes[PACK_MAX_K];
    for (int64_t n = begin; n < end; n++) {
        if (atomic_load_explicit(&j->status, memory_order_relaxed) != PACK_OK) return;
        const char *src = j->src + (size_t)n * j->row_bytes;
        /* The next row into the caches while this one is packed: rows start
         * new pages, where the hardware prefetchers stop. */
        if (n + 1 < end)
            for (size_t b = 0; b < j->row_bytes; b += 64) __builtin_prefetch(src + j->row_bytes + b, 0, 1);
        int8_t *q = j->layout == PACK_ROWS ? j->codes + (size_t)n * (size_t)j->K : row_codes;
        int rc = pack_row(j->path, j->t, src, j->K, q, &j->scales[n]);
        if (rc != PACK_OK) {
            int ok = PACK_OK;
            atomic_compare_exchange_strong(&j->status, &ok, rc);
            return;
        }
        if (j->layout == PACK_AMX) scatter_amx(q, j->K, (int)n, j->codes);
        if (j->layout == PACK_RKNPU) pack_rknpu_scatter(q, j->K, j->N, (int)n, j->codes);
    }
}

int pack_matrix(struct threadpool *pool, enum pack_path path, enum qtype t, const void *src, int K, int N,
                enum pack_layout layout, int8_t *codes, float *scales) {
    int rc = pack_check_shape(layout, K, N);
    if (rc != PACK_OK) return rc;
    size_t row_bytes = quant_row_size(t, K);
    if (row_bytes == 0 || !quant_traits(t)) return PACK_E_TYPE;
    struct matrix_job j = {.path = path, .t = t, .src = src, .row_bytes = row_bytes, .K = K, .N = N,
                           .layout = layout, .codes = codes, .scales = scales};
    atomic_init(&j.status, PACK_OK);
    /* 16 rows per chunk: one AMX tile row band, and ~16-64 KiB of source. */
    threadpool_parallel_for(pool, N, 16, pack_rows, &j);
    return atomic_load(&j.status);
}

int8_t pack_code_at(enum pack_layout layout, const int8_t *codes, int K, int n, int k) {
    if (layout == PACK_ROWS) return codes[(size_t)n * (size_t)K + (size_t)k];
    if (layout == PACK_RKNPU) return 0; /* needs N: pack_rknpu_offset */
    const size_t k_tiles = (size_t)K / 64;
    size_t tile = (size_t)(n / 16) * k_tiles + (size_t)(k / 64);
    return codes[tile * 1024 + (size_t)((k % 64) / 4) * 64 + (size_t)(n % 16) * 4 + (size_t)(k % 4)];
}

bool pack_codes_in_range(const int8_t *codes, size_t n) { return n == 0 || !memchr(codes, 0x80, n); }

const char *pack_status_string(int status) {
    switch (status) {
    case PACK_OK: return "ok";
    case PACK_E_TYPE: return "type cannot be packed (unknown type, or K not a multiple of its block)";
    case PACK_E_SHAPE: return "shape outside the layout's envelope";
    case PACK_E_VALUE: return "weights hold a NaN or an infinity";
    default: return "unknown pack status";
    }
}
