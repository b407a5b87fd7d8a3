/* Matmuls whose activations are quantized inside their own parallel job
 * (matmul_many, matmul): each item waits only for the activation rows it
 * reads. Equal bit for bit to the same matmuls quantized first and run on
 * one thread, for row counts below, at and past the blocks the job tracks,
 * and for groups of matrices larger than one job takes. */
#include "harness.h"

#include "core/threadpool.h"
#include "quant/matmul.h"

#include <stdlib.h>
#include <string.h>

enum { COLS = 512, MATS = 6 };

int main(void) {
    quant_init(ISA_COUNT);
    struct threadpool *pool = threadpool_new(2, false);
    const int rows[MATS] = { 64, 128, 48, 256, 32, 80 };
    const enum qtype types[] = { QT_Q4_K, QT_Q8_0 };
    for (int ti = 0; ti < 2; ti++) {
        const struct qtype_traits *tr = quant_traits(types[ti]);
        struct matrix w[MATS];
        const struct matrix *wp[MATS];
        for (int k = 0; k < MATS; k++) {
            float *f = malloc(sizeof(float) * COLS * rows[k]);
            for (int i = 0; i < COLS * rows[k]; i++) f[i] = test_symmetric();
            size_t row_bytes = quant_row_size(types[ti], COLS);
            void *data = malloc(row_bytes * rows[k]);
            for (int r = 0; r < rows[k]; r++) tr->from_float(f + (size_t)r * COLS, (char *)data + r * row_bytes, COLS);
            free(f);
            w[k] = (struct matrix){ data, types[ti], rows[k], COLS, row_bytes, NULL };
            wp[k] = &w[k];
        }
        const int Ms[] = { 1, 4, 5, 9, 64, 65, 130, 4096, 4161 };
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            int M = Ms[mi];
            float *x = malloc(sizeof(float) * COLS * M);
            for (int i = 0; i < COLS * M; i++) x[i] = test_symmetric() * 4.0f;
            void *scratch = malloc(matmul_scratch_size(&w[0], M));
            float *want[MATS], *got[MATS];
            for (int k = 0; k < MATS; k++) {
                want[k] = malloc(sizeof(float) * rows[k] * M);
                got[k] = malloc(sizeof(float) * rows[k] * M);
                memset(got[k], 0, sizeof(float) * rows[k] * M);
            }
            size_t stride = quantize_rows(NULL, types[ti], x, M, COLS, scratch, 0);
            matmul_preq_many(NULL, MATS, wp, scratch, stride, M, want);
            memset(scratch, 0, matmul_scratch_size(&w[0], M));
            matmul_many(pool, MATS, wp, x, M, scratch, got);
            int off = 0;
            for (int k = 0; k < MATS; k++) off += memcmp(want[k], got[k], sizeof(float) * rows[k] * M) != 0;
            CHECKF(off == 0, "%s M=%d: %d of %d matrices differ from quantize-then-multiply on one thread",
                   quant_type_name(types[ti]), M, off, MATS);
            memset(got[1], 0, sizeof(float) * rows[1] * M);
            matmul(pool, &w[1], x, M, got[1], scratch);
            CHECKF(memcmp(want[1], got[1], sizeof(float) * rows[1] * M) == 0, "%s M=%d: matmul differs",
                   quant_type_name(types[ti]), M);
            for (int k = 0; k < MATS; k++) { free(want[k]); free(got[k]); }
            free(scratch);
            free(x);
        }
        for (int k = 0; k < MATS; k++) free((void *)w[k].data);
    }
    threadpool_free(pool);
    return test_finish();
}
