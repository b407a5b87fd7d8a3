// The cuda device's kernels. Weights stay in their GGUF blocks; each launch
// covers every job of a submission (all routed experts of a layer), each
// thread block finding its job by its tile number. The arithmetic is
// qblock.h's, which the host twins of dev_cuda_ref.c run too.
//
//   moex_cuda_quantize  f32 activation rows -> qb_q8 blocks, a chunk per thread
//   moex_cuda_gemv      m <= CUDA_GEMV_MAX_M: a warp per output channel, lane l
//                       takes chunks l, l + 32, ...; dp4a; butterfly sum
//   moex_cuda_gemm      larger m: 64 x 64 output tiles, K in steps of one
//                       chunk dequantized to f16 in shared memory, f16 tensor
//                       cores (wmma 16x16x16) accumulating in f32
#include <cuda_fp16.h>
#include <mma.h>

extern "C" {
#include "dev/cuda/layer.h"
#include "dev/cuda/qblock.h"
}

namespace {

// The job of tile `tile`: the last whose first_tile <= tile.
__device__ int find_job(const cuda_job_desc *jobs, int n_jobs, unsigned tile) {
    int lo = 0, hi = n_jobs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (jobs[mid].first_tile <= tile) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Runs body.run<T>() with T the job's type as a constant, so
// that qb_chunk_get's switch folds away in the inner loops.
template <typename Body> __device__ void with_type(int type, Body &body) {
    switch (type) {
    case QT_Q4_0: body.template run<QT_Q4_0>(); break;
    case QT_Q4_1: body.template run<QT_Q4_1>(); break;
    case QT_Q5_0: body.template run<QT_Q5_0>(); break;
    case QT_Q5_1: body.template run<QT_Q5_1>(); break;
    case QT_Q8_0: body.template run<QT_Q8_0>(); break;
    case QT_Q4_K: body.template run<QT_Q4_K>(); break;
    case QT_Q5_K: body.template run<QT_Q5_K>(); break;
    case QT_Q6_K: body.template run<QT_Q6_K>(); break;
    default: break;
    }
}

// One output channel's dots with the job's m <= CUDA_GEMV_MAX_M rows: lane l
// takes chunks l, l + 32, ... (qb_lane_partial's order for every row).
struct gemv_body {
    const cuda_job_desc *j;
    const uint8_t *row;
    const qb_q8 *act;
    int nc, lane;
    float *s;
    template <int T> __device__ void run() {
        for (int c = lane; c < nc; c += QB_WARP) {
            qb_chunk w;
            qb_chunk_get(T, row, c, &w);
            for (int i = 0; i < j->m; i++) s[i] = qb_add(s[i], qb_dot_chunk(&w, &act[(size_t)i * nc + c]));
        }
    }
};

// Column `col` of the GEMM's weight tile: chunk c of channel n as f16.
struct dequant_body {
    const uint8_t *row;
    int c;
    __half *col;
    template <int T> __device__ void run() {
        qb_chunk w;
        qb_chunk_get(T, row, c, &w);
        for (int i = 0; i < QB_CHUNK; i++) col[i] = __float2half_rn(qb_chunk_value(&w, i));
    }
};

} // namespace

extern "C" __global__ void moex_cuda_quantize(const cuda_job_desc *jobs, int n_jobs) {
    const cuda_job_desc *j = &jobs[find_job(jobs, n_jobs, blockIdx.x)];
    long chunk = (long)(blockIdx.x - j->first_tile) * CUDA_QUANT_CHUNKS + threadIdx.x;
    long n_chunks = (long)j->m * (j->K / QB_CHUNK);
    if (chunk >= n_chunks) return;
    long row = chunk / (j->K / QB_CHUNK), c = chunk % (j->K / QB_CHUNK);
    const float *x = (const float *)j->act + row * j->K + c * QB_CHUNK;
    float v[QB_CHUNK];
    for (int i = 0; i < QB_CHUNK; i++) v[i] = x[i];
    qb_q8 q;
    qb_quantize_q8(v, &q);
    ((qb_q8 *)j->act_q8)[chunk] = q;
}

extern "C" __global__ void __launch_bounds__(32 * CUDA_GEMV_COLS)
    moex_cuda_gemv(const cuda_job_desc *jobs, int n_jobs) {
    const cuda_job_desc *j = &jobs[find_job(jobs, n_jobs, blockIdx.x)];
    int lane = threadIdx.x % 32, n = (int)(blockIdx.x - j->first_tile) * CUDA_GEMV_COLS + threadIdx.x / 32;
    if (n >= j->N) return; // a whole warp leaves together
    int nc = j->K / QB_CHUNK, m = j->m;
    const uint8_t *row = (const uint8_t *)j->w + (size_t)n * j->row_bytes;
    const qb_q8 *act = (const qb_q8 *)j->act_q8;
    float s[CUDA_GEMV_MAX_M];
    for (int i = 0; i < CUDA_GEMV_MAX_M; i++) s[i] = 0.0f;
    gemv_body body = {j, row, act, nc, lane, s};
    with_type(j->type, body);
    for (int i = 0; i < m; i++) {
        float v = s[i];
        for (int off = QB_WARP / 2; off > 0; off >>= 1) v = qb_add(v, __shfl_xor_sync(0xffffffffu, v, off));
        if (lane == 0) ((float *)j->out)[(size_t)i * j->out_stride + n] = v;
    }
}

extern "C" __global__ void __launch_bounds__(256) moex_cuda_gemm(const cuda_job_desc *jobs, int n_jobs) {
    using namespace nvcuda;
    enum { TM = CUDA_GEMM_TILE_M, TN = CUDA_GEMM_TILE_N, TK = CUDA_GEMM_TILE_K };
    __shared__ __align__(32) __half a_tile[TM * TK]; // row-major (m, k)
    __shared__ __align__(32) __half b_tile[TN * TK]; // column n's TK values together: (k, n) col-major
    __shared__ __align__(32) float c_tile[TM * TN];
    const cuda_job_desc *j = &jobs[find_job(jobs, n_jobs, blockIdx.x)];
    int tiles_n = (j->N + TN - 1) / TN, t = (int)(blockIdx.x - j->first_tile);
    int m0 = t / tiles_n * TM, n0 = t % tiles_n * TN;
    int warp = threadIdx.x / 32, tid = threadIdx.x;
    // warp w: output rows 16 (w / 2) .. + 16, columns 32 (w % 2) .. + 32 (two fragments)
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    const float *act = (const float *)j->act;
    for (int k0 = 0; k0 < j->K; k0 += TK) {
        for (int e = tid; e < TM * TK; e += blockDim.x) {
            int r = e / TK, k = e % TK;
            a_tile[e] = __float2half_rn(m0 + r < j->m ? act[(size_t)(m0 + r) * j->K + k0 + k] : 0.0f);
        }
        if (tid < TN) {
            __half *col = b_tile + tid * TK;
            if (n0 + tid < j->N) {
                dequant_body body = {(const uint8_t *)j->w + (size_t)(n0 + tid) * j->row_bytes, k0 / QB_CHUNK, col};
                with_type(j->type, body);
            } else {
                for (int i = 0; i < TK; i++) col[i] = __float2half_rn(0.0f);
            }
        }
        __syncthreads();
        for (int kk = 0; kk < TK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, a_tile + (warp / 2) * 16 * TK + kk, TK);
            for (int f = 0; f < 2; f++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, b_tile + ((warp % 2) * 32 + f * 16) * TK + kk, TK);
                wmma::mma_sync(acc[f], fa, fb, acc[f]);
            }
        }
        __syncthreads();
    }
    for (int f = 0; f < 2; f++)
        wmma::store_matrix_sync(c_tile + (warp / 2) * 16 * TN + (warp % 2) * 32 + f * 16, acc[f], TN, wmma::mem_row_major);
    __syncthreads();
    float *out = (float *)j->out;
    for (int e = tid; e < TM * TN; e += blockDim.x) {
        int r = e / TN, c = e % TN;
        if (m0 + r < j->m && n0 + c < j->N) out[(size_t)(m0 + r) * j->out_stride + n0 + c] = c_tile[e];
    }
}
