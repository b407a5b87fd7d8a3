/* The kernels' host twins: what each launch of kernels.cu computes, in
 * plain C on the same qblock.h arithmetic. The fake CUDA layer of the tests
 * runs launches with these; on a GPU the kernels' outputs are compared with
 * them (the quantizer and the GEMV bit for bit, the GEMM within f16
 * operand rounding). */
#include "dev/dev_cuda.h"

#include "dev/cuda/qblock.h"

#include <math.h>
#include <stdlib.h>

static void run_quantize(const struct cuda_job_desc *j) {
    int nc = j->K / QB_CHUNK;
    const float *act = (const float *)(uintptr_t)j->act;
    struct qb_q8 *q8 = (struct qb_q8 *)(uintptr_t)j->act_q8;
    for (long c = 0; c < (long)j->m * nc; c++) qb_quantize_q8(act + c * QB_CHUNK, &q8[c]);
}

static void run_gemv(const struct cuda_job_desc *j) {
    int nc = j->K / QB_CHUNK;
    const struct qb_q8 *q8 = (const struct qb_q8 *)(uintptr_t)j->act_q8;
    float *out = (float *)(uintptr_t)j->out;
    for (int n = 0; n < j->N; n++) {
        const uint8_t *row = (const uint8_t *)(uintptr_t)j->w + (size_t)n * j->row_bytes;
        for (int i = 0; i < j->m; i++)
            out[(size_t)i * j->out_stride + (size_t)n] = qb_row_dot_host(j->type, row, q8 + (size_t)i * (size_t)nc, nc);
    }
}

/* The GEMM's operands rounded to f16 as the kernel stores them; the sum in
 * double stands for the tensor cores' f32 accumulation (order unknown). */
static void run_gemm(const struct cuda_job_desc *j) {
    const float *act = (const float *)(uintptr_t)j->act;
    float *out = (float *)(uintptr_t)j->out;
    size_t K = (size_t)j->K, mk = (size_t)j->m * K;
    float *a = malloc(mk * sizeof(float)), *w = malloc(K * sizeof(float));
    if (!a || !w) { /* the fake's host ran out of memory: outputs NaN, which every comparison catches */
        for (int i = 0; i < j->m; i++)
            for (int n = 0; n < j->N; n++) out[(size_t)i * j->out_stride + (size_t)n] = NAN;
        free(a);
        free(w);
        return;
    }
    for (size_t e = 0; e < mk; e++) a[e] = qb_half(qb_float_half(act[e]));
    for (int n = 0; n < j->N; n++) {
        const uint8_t *row = (const uint8_t *)(uintptr_t)j->w + (size_t)n * j->row_bytes;
        for (int c = 0; c < j->K / QB_CHUNK; c++) {
            struct qb_chunk ch;
            qb_chunk_get(j->type, row, c, &ch);
            for (int v = 0; v < QB_CHUNK; v++) w[c * QB_CHUNK + v] = qb_half(qb_float_half(qb_chunk_value(&ch, v)));
        }
        for (int i = 0; i < j->m; i++) {
            double s = 0;
            for (size_t k = 0; k < K; k++) s += (double)w[k] * a[(size_t)i * K + k];
            out[(size_t)i * j->out_stride + (size_t)n] = (float)s;
        }
    }
    free(a);
    free(w);
}

void cuda_ref_run(enum cuda_kernel kernel, const struct cuda_job_desc *job) {
    switch (kernel) {
    case CUDA_K_QUANTIZE: run_quantize(job); break;
    case CUDA_K_GEMV: run_gemv(job); break;
    case CUDA_K_GEMM: run_gemm(job); break;
    default: break;
    }
}
