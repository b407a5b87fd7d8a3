/* The gated delta rule, token by token and in chunks.
 *
 * The state of a head is stored key-major, S[m][i] for key dim m and value
 * dim i, so that every product with it is a sum of its rows scaled by a
 * key's or query's components (axpy over the value dims), which compilers
 * vectorise without reordering a sum.
 *
 * Chunked form. In a chunk starting from state S0, with G_t the running sum
 * of g inside the chunk, write u_t = beta_t (v_t - exp(g_t) S_{t-1} k_t) for
 * what token t adds, so that S_t = exp(G_t) S0 + sum_{j<=t} exp(G_t - G_j) u_j k_j^T.
 * Then the u_t of the chunk satisfy the lower triangular system
 *     u_t + sum_{j<t} beta_t exp(G_t - G_j) (k_t . k_j) u_j = beta_t v_t - beta_t exp(G_t) S0 k_t
 * which forward substitution solves for W (right side beta v) and Y (right
 * side beta exp(G) k) separately: u_t = W_t - S0 Y_t. Outputs and the next
 * state follow from the unrolled sum. */
#include "arch/block_delta_net.h"

#include "arch/block_proj.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void axpy(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* y += sum_r a[r] x[r] over `rows` rows of x (x_stride apart), four rows per
 * pass over y: the products with the state, where the block's time goes. */
static void axpy_rows(float *y, const float *a, const float *x, size_t x_stride, int rows, int n) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *x0 = x + r * x_stride, *x1 = x0 + x_stride, *x2 = x1 + x_stride, *x3 = x2 + x_stride;
        float a0 = a[r], a1 = a[r + 1], a2 = a[r + 2], a3 = a[r + 3];
        for (int i = 0; i < n; i++) y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
    }
    for (; r < rows; r++) axpy(y, a[r], x + r * x_stride, n);
}

void delta_net_recurrent(const struct delta_net_dims *d, const struct delta_net_io *io, int head) {
    int D = d->head_dim, kh = head % d->n_k_heads;
    size_t kstride = (size_t)d->n_k_heads * D, vstride = (size_t)d->n_v_heads * D;
    float scale = 1.0f / sqrtf((float)D);
    float *S = io->state + (size_t)head * D * D; /* (key, value) */
    float delta[DELTA_NET_MAX_DIM];
    for (int t = 0; t < io->n; t++) {
        const float *q = io->q + t * kstride + (size_t)kh * D;
        const float *k = io->k + t * kstride + (size_t)kh * D;
        const float *v = io->v + t * vstride + (size_t)head * D;
        float *o = io->out + t * vstride + (size_t)head * D;
        float decay = expf(io->g[(size_t)t * d->n_v_heads + head]);
        float beta = io->beta[(size_t)t * d->n_v_heads + head];
        /* delta = beta (v - decay S^T k), then S = decay S + k delta^T and
         * o = S^T q in one more pass. */
        memset(delta, 0, (size_t)D * sizeof *delta);
        axpy_rows(delta, k, S, (size_t)D, D, D);
        for (int i = 0; i < D; i++) delta[i] = beta * (v[i] - decay * delta[i]);
        for (int m = 0; m < D; m++) {
            float *row = S + (size_t)m * D;
            for (int i = 0; i < D; i++) row[i] = decay * row[i] + k[m] * delta[i];
        }
        memset(o, 0, (size_t)D * sizeof *o);
        axpy_rows(o, q, S, (size_t)D, D, D);
        for (int i = 0; i < D; i++) o[i] *= scale;
    }
}

size_t delta_net_chunk_scratch(const struct delta_net_dims *d, int chunk) {
    size_t C = (size_t)chunk, D = (size_t)d->head_dim;
    return 3 * C           /* G, decay to the chunk's end, coefficients */
         + 2 * C * C       /* k_t . k_j, q_t . k_j */
         + 3 * C * D;      /* W (becomes u), Y, the keys transposed */
}

/* One chunk of c tokens at t0 for one head. */
static void chunk_step(const struct delta_net_dims *d, const struct delta_net_io *io, int head, int t0, int c,
                       float *scratch) {
    int D = d->head_dim, kh = head % d->n_k_heads, H = d->n_v_heads;
    size_t kstride = (size_t)d->n_k_heads * D, vstride = (size_t)H * D;
    float scale = 1.0f / sqrtf((float)D);
    float *S = io->state + (size_t)head * D * D;
    float *G = scratch, *to_end = G + c, *KK = to_end + c, *QK = KK + (size_t)c * c;
    float *W = QK + (size_t)c * c, *Y = W + (size_t)c * D, *KT = Y + (size_t)c * D; /* KT: (D, c) */
    float *coefs = KT + (size_t)D * c;
#define KEY(t) (io->k + (size_t)(t0 + (t)) * kstride + (size_t)kh * D)
#define QRY(t) (io->q + (size_t)(t0 + (t)) * kstride + (size_t)kh * D)
    double acc = 0;
    for (int t = 0; t < c; t++) {
        acc += io->g[(size_t)(t0 + t) * H + head];
        G[t] = (float)acc;
    }
    for (int t = 0; t < c; t++) to_end[t] = expf(G[c - 1] - G[t]);
    /* Key-key and query-key products of the chunk, as rows of axpys over KT. */
    for (int j = 0; j < c; j++)
        for (int m = 0; m < D; m++) KT[(size_t)m * c + j] = KEY(j)[m];
    for (int t = 0; t < c; t++) {
        float *kk = KK + (size_t)t * c, *qk = QK + (size_t)t * c;
        const float *kt = KEY(t), *qt = QRY(t);
        memset(kk, 0, (size_t)c * sizeof *kk);
        memset(qk, 0, (size_t)c * sizeof *qk);
        for (int m = 0; m < D; m++) {
            axpy(kk, kt[m], KT + (size_t)m * c, c);
            axpy(qk, qt[m], KT + (size_t)m * c, c);
        }
    }
    /* W_t = beta_t v_t and Y_t = beta_t exp(G_t) k_t, minus the earlier rows
     * of the chunk (forward substitution). */
    for (int t = 0; t < c; t++) {
        float beta = io->beta[(size_t)(t0 + t) * H + head];
        const float *kt = KEY(t);
        float *w = W + (size_t)t * D, *y = Y + (size_t)t * D;
        const float *v = io->v + (size_t)(t0 + t) * vstride + (size_t)head * D;
        float ey = beta * expf(G[t]);
        for (int i = 0; i < D; i++) { w[i] = beta * v[i]; y[i] = ey * kt[i]; }
        for (int j = 0; j < t; j++) {
            float l = beta * expf(G[t] - G[j]) * KK[(size_t)t * c + j];
            axpy(w, -l, W + (size_t)j * D, D);
            axpy(y, -l, Y + (size_t)j * D, D);
        }
    }
    /* u_t = W_t - S0^T Y_t (kept in W), and
     * o_t = exp(G_t) S0^T q_t + sum_{j<=t} exp(G_t - G_j) (q_t . k_j) u_j. */
    for (int t = 0; t < c; t++) {
        float *w = W + (size_t)t * D, *y = Y + (size_t)t * D;
        const float *qt = QRY(t);
        float *o = io->out + (size_t)(t0 + t) * vstride + (size_t)head * D;
        float e = expf(G[t]);
        for (int m = 0; m < D; m++) y[m] = -y[m];
        axpy_rows(w, y, S, (size_t)D, D, D);
        memset(o, 0, (size_t)D * sizeof *o);
        axpy_rows(o, qt, S, (size_t)D, D, D);
        for (int i = 0; i < D; i++) o[i] *= e;
        for (int j = 0; j <= t; j++) coefs[j] = expf(G[t] - G[j]) * QK[(size_t)t * c + j];
        axpy_rows(o, coefs, W, (size_t)D, t + 1, D);
        for (int i = 0; i < D; i++) o[i] *= scale;
    }
    /* S = exp(G_last) S0 + sum_j (exp(G_last - G_j) k_j) u_j^T, row by row. */
    float e_last = expf(G[c - 1]);
    for (int m = 0; m < D; m++) {
        float *row = S + (size_t)m * D;
        const float *km = KT + (size_t)m * c;
        for (int i = 0; i < D; i++) row[i] *= e_last;
        for (int j = 0; j < c; j++) coefs[j] = km[j] * to_end[j];
        axpy_rows(row, coefs, W, (size_t)D, c, D);
    }
#undef KEY
#undef QRY
}

void delta_net_chunked(const struct delta_net_dims *d, const struct delta_net_io *io, int head, int chunk,
                       float *scratch) {
    for (int t0 = 0; t0 < io->n; t0 += chunk) {
        int c = io->n - t0 < chunk ? io->n - t0 : chunk;
        chunk_step(d, io, head, t0, c, scratch);
    }
}

size_t delta_net_run_scratch(const struct delta_net_dims *d, int threads) {
    return (size_t)threads * delta_net_chunk_scratch(d, DELTA_NET_CHUNK);
}

struct run_job {
    const struct delta_net_dims *d;
    const struct delta_net_io *io;     /* (n_io) */
    float *scratch;
};

/* Item i: head i % n_v_heads of batch i / n_v_heads. */
static void run_heads(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct run_job *j = arg;
    float *scratch = j->scratch + (size_t)thread_index * delta_net_chunk_scratch(j->d, DELTA_NET_CHUNK);
    for (int64_t item = begin; item < end; item++) {
        const struct delta_net_io *io = &j->io[item / j->d->n_v_heads];
        int h = (int)(item % j->d->n_v_heads);
        if (io->n == 1) delta_net_recurrent(j->d, io, h);
        else delta_net_chunked(j->d, io, h, DELTA_NET_CHUNK, scratch);
    }
}

void delta_net_run_many(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                        int n_io, float *scratch) {
    struct run_job j = { d, io, scratch };
    threadpool_parallel_for(pool, (int64_t)n_io * d->n_v_heads, 1, run_heads, &j);
}

void delta_net_run(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                   float *scratch) {
    delta_net_run_many(pool, d, io, 1, scratch);
}

enum { DELTA_NET_MAX_RUNS = 64 };

static float silu(float x) { return x / (1.0f + expf(-x)); }

void delta_net_conv_silu(const float *x, int n, int channels, int K, const float *w, float *conv_state,
                         float *out) {
    int past = K - 1;
    for (int t = 0; t < n; t++)
        for (int ch = 0; ch < channels; ch++) {
            float s = 0;
            for (int j = 0; j < K; j++) {
                int src = t - past + j; /* < 0: from the state */
                float xv = src < 0 ? conv_state[(size_t)(past + src) * channels + ch] : x[(size_t)src * channels + ch];
                s += w[(size_t)ch * K + j] * xv;
            }
            out[(size_t)t * channels + ch] = silu(s);
        }
    /* The state keeps the last K-1 inputs: shift in the batch's tail. */
    for (int r = 0; r < past; r++) {
        int src = n - past + r; /* input index of state row r after the batch */
        float *dst = conv_state + (size_t)r * channels;
        if (src >= 0) memcpy(dst, x + (size_t)src * channels, (size_t)channels * sizeof *dst);
        else memmove(dst, conv_state + (size_t)(r + n) * channels, (size_t)channels * sizeof *dst);
    }
}

void l2_norm_rows(float *v, int n, int len, float eps) {
    for (int r = 0; r < n; r++) {
        float *x = v + (size_t)r * len;
        double sum = 0;
        for (int i = 0; i < len; i++) sum += (double)(x[i] * x[i]);
        float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int i = 0; i < len; i++) x[i] *= scale;
    }
}

static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

void delta_net_gates(float *alpha, float *b, int n, int n_v_heads, const float *dt_bias, const float *a) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < n_v_heads; h++) {
            size_t i = (size_t)t * n_v_heads + h;
            alpha[i] = softplus(alpha[i] + dt_bias[h]) * a[h];
            b[i] = 1.0f / (1.0f + expf(-b[i]));
        }
}

void gated_rms_norm_rows(float *o, const float *z, const float *w, int n, int len, float eps) {
    for (int r = 0; r < n; r++) {
        float *x = o + (size_t)r * len;
        const float *zr = z + (size_t)r * len;
        double sum = 0;
        for (int i = 0; i < len; i++) sum += (double)(x[i] * x[i]);
        float scale = 1.0f / sqrtf((float)(sum / len) + eps);
        for (int i = 0; i < len; i++) x[i] = (x[i] * scale) * w[i] * silu(zr[i]);
    }
}

/* ---------------------------------------------------------------- the layer */

static int channels(const struct delta_net_shape *s) {
    return (2 * s->dims.n_k_heads + s->dims.n_v_heads) * s->dims.head_dim;
}

int64_t delta_net_conv_floats(const struct delta_net_shape *s) {
    return (int64_t)(s->conv_kernel - 1) * channels(s);
}

int64_t delta_net_state_floats(const struct delta_net_shape *s) {
    return (int64_t)s->dims.n_v_heads * s->dims.head_dim * s->dims.head_dim;
}

struct delta_net_scratch {
    float *mixed, *conv;               /* (n_batch, channels) projection, then convolved */
    float *q, *k;                      /* (n_batch, n_k_heads D) */
    float *v, *z, *o;                  /* (n_batch, n_v_heads D) */
    float *g, *beta;                   /* (n_batch, n_v_heads) */
    float *run;                        /* delta_net_run's */
};

struct delta_net_scratch *delta_net_scratch_new(const struct delta_net_shape *sh, int n_batch, int threads) {
    struct delta_net_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t B = (size_t)n_batch, ch = (size_t)channels(sh), D = (size_t)sh->dims.head_dim;
    size_t kd = (size_t)sh->dims.n_k_heads * D, vd = (size_t)sh->dims.n_v_heads * D;
    s->mixed = malloc(B * ch * 4);
    s->conv = malloc(B * ch * 4);
    s->q = malloc(B * kd * 4);
    s->k = malloc(B * kd * 4);
    s->v = malloc(B * vd * 4);
    s->z = malloc(B * vd * 4);
    s->o = malloc(B * vd * 4);
    s->g = malloc(B * sh->dims.n_v_heads * 4);
    s->beta = malloc(B * sh->dims.n_v_heads * 4);
    s->run = malloc(delta_net_run_scratch(&sh->dims, threads) * 4);
    if (!s->mixed || !s->conv || !s->q || !s->k || !s->v || !s->z || !s->o || !s->g || !s->beta || !s->run) {
        delta_net_scratch_free(s);
        return NULL;
    }
    return s;
}

void delta_net_scratch_free(struct delta_net_scratch *s) {
    if (!s) return;
    free(s->mixed); free(s->conv); free(s->q); free(s->k); free(s->v); free(s->z); free(s->o);
    free(s->g); free(s->beta); free(s->run);
    free(s);
}

void delta_net_layer(struct context *c, const struct delta_net_shape *sh, const struct delta_net_weights *w,
                     struct delta_net_scratch *s, int layer, int n, const float *xn, float *out) {
    const struct delta_net_dims *d = &sh->dims;
    int D = d->head_dim, ch = channels(sh), H = d->n_v_heads;
    size_t kd = (size_t)d->n_k_heads * D, vd = (size_t)H * D;
    int64_t t0 = time_ns();
    const struct matrix *proj[4] = { &w->qkv, &w->z, &w->beta, &w->alpha };
    float *proj_out[4] = { s->mixed, s->z, s->beta, s->g };
    project_rows(c, proj, proj_out, 4, xn, n);
    int64_t t1 = time_ns();
    for (int r = 0; r < c->n_runs; r++) {
        const struct batch_run *run = &c->runs[r];
        size_t f = (size_t)run->first;
        delta_net_conv_silu(s->mixed + f * ch, run->n, ch, sh->conv_kernel, (const float *)w->conv.data,
                            c->seqs[run->seq].layers[layer].conv, s->conv + f * ch);
    }
    for (int t = 0; t < n; t++) {
        const float *row = s->conv + (size_t)t * ch;
        memcpy(s->q + t * kd, row, kd * 4);
        memcpy(s->k + t * kd, row + kd, kd * 4);
        memcpy(s->v + t * vd, row + 2 * kd, vd * 4);
    }
    l2_norm_rows(s->q, n * d->n_k_heads, D, sh->eps);
    l2_norm_rows(s->k, n * d->n_k_heads, D, sh->eps);
    delta_net_gates(s->g, s->beta, n, H, w->dt_bias, w->a);
    /* Every run's heads as one job, up to DELTA_NET_MAX_RUNS at a time. */
    struct delta_net_io io[DELTA_NET_MAX_RUNS];
    for (int r0 = 0; r0 < c->n_runs; r0 += DELTA_NET_MAX_RUNS) {
        int n_io = c->n_runs - r0 < DELTA_NET_MAX_RUNS ? c->n_runs - r0 : DELTA_NET_MAX_RUNS;
        for (int r = 0; r < n_io; r++) {
            const struct batch_run *run = &c->runs[r0 + r];
            size_t f = (size_t)run->first;
            io[r] = (struct delta_net_io){ run->n, s->q + f * kd, s->k + f * kd, s->v + f * vd, s->g + f * H,
                                           s->beta + f * H, c->seqs[run->seq].layers[layer].recurrent, s->o + f * vd };
        }
        delta_net_run_many(c->pool, d, io, n_io, s->run);
    }
    gated_rms_norm_rows(s->o, s->z, w->norm, n * H, D, sh->eps);
    int64_t t2 = time_ns();
    dense_matmul(c, &w->out, s->o, n, out);
    int64_t t3 = time_ns();
    c->times.attn_matmul += (t1 - t0) + (t3 - t2);
    c->times.delta_net += t2 - t1;
}
