/* The cuda device's block arithmetic (src/dev/cuda/qblock.h), compiled for
 * the host, against the scalar reference (src/quant/quant_ref.c): every
 * chunk's values bit for bit the reference dequantization of each type,
 * fp16 conversions exhaustively / on edge cases bit for bit, the q8
 * activation blocks within half a step, and a row's dot with quantized
 * activations within the quantization's tolerance of the exact dot and of
 * the CPU path's vec_dot. The kernels run this same code. */
#include "harness.h"

#include "dev/cuda/qblock.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum qtype types[] = {QT_Q4_0, QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
#define N_TYPES (int)(sizeof types / sizeof types[0])

static float gauss(void) {
    double u1 = ((double)(test_rand() >> 11) + 1.0) * 0x1p-53, u2 = (double)(test_rand() >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* A row of K values of t, quantized from gaussians (scale varying by block
 * so that sub-block scales and mins differ). */
static void *make_row(enum qtype t, int K, float *src) {
    for (int k = 0; k < K; k++) src[k] = gauss() * (1.0f + (float)((k / 32) % 7)) + ((k / 64) % 3 == 1 ? 0.7f : 0.0f);
    void *row = malloc(quant_row_size(t, K));
    quant_traits(t)->from_float(src, row, K);
    return row;
}

static void test_half(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = qb_half((uint16_t)h), b = fp16_to_f32((uint16_t)h);
        if (memcmp(&a, &b, sizeof a) && !(isnan(a) && isnan(b))) bad++;
    }
    CHECKF(bad == 0, "%d of 65536 halves convert differently from fp16_to_f32", bad);
    static const float edge[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.99f, 65520.0f, 1e9f, 6.1035156e-05f,
                                 6.0e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-30f, 0.33333334f, -1234.567f};
    bad = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        if (qb_float_half(edge[i]) != f32_to_fp16(edge[i])) bad++;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)test_rand();
        float f;
        memcpy(&f, &u, sizeof f);
        if (isnan(f)) continue;
        if (qb_float_half(f) != f32_to_fp16(f)) bad++;
    }
    CHECKF(bad == 0, "%d floats round to another half than f32_to_fp16", bad);
}

static void test_dequant(void) {
    enum { K = 1024 };
    float src[K], ref[K], got[K];
    for (int ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = types[ti];
        CHECK(qb_block_bytes(t) == (int)quant_traits(t)->type_size);
        CHECK(qb_block_values(t) == quant_traits(t)->block_size);
        for (int rep = 0; rep < 4; rep++) {
            uint8_t *row = make_row(t, K, src);
            quant_traits(t)->to_float(row, ref, K);
            for (int c = 0; c < K / QB_CHUNK; c++) {
                struct qb_chunk ch;
                qb_chunk_get(t, row, c, &ch);
                for (int i = 0; i < QB_CHUNK; i++) got[c * QB_CHUNK + i] = qb_chunk_value(&ch, i);
            }
            CHECKF(!memcmp(got, ref, sizeof ref), "%s: chunks differ from the reference dequantization",
                   quant_type_name(t));
            free(row);
        }
    }
}

static void test_quantize_q8(void) {
    float x[32];
    double worst = 0;
    for (int rep = 0; rep < 2000; rep++) {
        float scale = rep % 10 == 0 ? 0.0f : (float)exp((double)gauss() * 3.0);
        for (int i = 0; i < 32; i++) x[i] = gauss() * scale;
        struct qb_q8 a;
        qb_quantize_q8(x, &a);
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int c = qb_code(a.q, i);
            sum += c;
            double err = fabs((double)a.d * c - x[i]);
            double step = a.d > 0 ? a.d : 1.0;
            if (err / step > worst) worst = err / step;
            if (c < -127 || c > 127) worst = 1e9;
        }
        CHECK(sum == a.sum);
    }
    CHECKF(worst <= 0.5 + 1e-5, "q8 codes are %.4f steps off (<= 0.5)", worst);
}

/* A row's dot with its activations through q8 blocks: within a tolerance of
 * the exact dot of the dequantized weights and the floats (the activation
 * rounding: half a step per value), and close to the CPU path's vec_dot. */
static void test_dot(void) {
    enum { K = 2048, NC = K / QB_CHUNK };
    static float src[K], w[K], x[K];
    static struct qb_q8 act[NC];
    for (int ti = 0; ti < N_TYPES; ti++) {
        enum qtype t = types[ti];
        const struct qtype_traits *tr = quant_traits(t);
        int fails = 0, fails_cpu = 0;
        for (int rep = 0; rep < 20; rep++) {
            uint8_t *row = make_row(t, K, src);
            tr->to_float(row, w, K);
            for (int k = 0; k < K; k++) x[k] = gauss();
            for (int c = 0; c < NC; c++) qb_quantize_q8(x + c * QB_CHUNK, &act[c]);
            double exact = 0, bound = 0;
            for (int k = 0; k < K; k++) exact += (double)w[k] * x[k];
            for (int c = 0; c < NC; c++)
                for (int i = 0; i < QB_CHUNK; i++) bound += fabs((double)w[c * QB_CHUNK + i]) * act[c].d * 0.5;
            float got = qb_row_dot_host(t, row, act, NC);
            if (!(fabs(got - exact) <= bound * 1.01 + 1e-4)) fails++;
            /* the CPU path: activations in the type's vec_dot type */
            void *xq = malloc(quant_row_size(tr->vec_dot_type, K));
            quant_traits(tr->vec_dot_type)->from_float(x, xq, K);
            float cpu;
            tr->vec_dot(K, &cpu, row, xq);
            if (!(fabs(got - cpu) <= 2.0 * bound + 1e-4)) fails_cpu++;
            if (rep == 0 && (fails || fails_cpu))
                fprintf(stderr, "%s: got %g exact %g cpu %g bound %g\n", quant_type_name(t), got, exact, cpu, bound);
            free(xq);
            free(row);
        }
        CHECKF(fails == 0, "%s: %d of 20 row dots outside the activation rounding of the exact dot",
               quant_type_name(t), fails);
        CHECKF(fails_cpu == 0, "%s: %d of 20 row dots far from the CPU path's", quant_type_name(t), fails_cpu);
    }
}

/* The warp order of qb_row_dot_host is one fixed order: chunk by chunk
 * (any order) agrees within float rounding, and a row shorter than a warp
 * (a lane with nothing) is handled. */
static void test_dot_order(void) {
    enum { K = 256 * 3 };
    float src[K];
    struct qb_q8 act[K / QB_CHUNK];
    for (int c = 0; c < K / QB_CHUNK; c++) {
        for (int i = 0; i < 32; i++) src[i] = gauss();
        qb_quantize_q8(src, &act[c]);
    }
    for (int ti = 0; ti < N_TYPES; ti++) {
        uint8_t *row = make_row(types[ti], K, src);
        double seq = 0, mag = 0;
        for (int c = 0; c < K / QB_CHUNK; c++) {
            struct qb_chunk ch;
            qb_chunk_get(types[ti], row, c, &ch);
            float d = qb_dot_chunk(&ch, &act[c]);
            seq += d;
            mag += fabs(d);
        }
        float warp = qb_row_dot_host(types[ti], row, act, K / QB_CHUNK);
        CHECKF(fabs(warp - seq) <= 1e-5 * mag + 1e-6, "%s: warp order %g, sequential %g", quant_type_name(types[ti]),
               (double)warp, seq);
        free(row);
    }
}

int main(void) {
    test_half();
    test_dequant();
    test_quantize_q8();
    test_dot();
    test_dot_order();
    return test_finish();
}
