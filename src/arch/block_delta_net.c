/* The gated delta rule, token by token and in chunks.
 *
 * The state of a head is stored key-major, S[m][i] for key dim m and value
 * dim i, so that every product with it is a sum of its rows scaled by a
 * key's or query's components (rows of a small gemm over the value dims:
 * delta_net_kernels.h, one build per ISA).
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
#include "arch/delta_net_kernels.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void delta_net_recurrent(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                         const struct delta_net_io *io, int head) {
    int D = d->head_dim, kh = head % d->n_k_heads;
    size_t kstride = (size_t)d->n_k_heads * D, vstride = (size_t)d->n_v_heads * D;
    float scale = 1.0f / sqrtf((float)D);
    float *S = io->state + (size_t)head * D * D; /* (key, value) */
    float delta[DELTA_NET_MAX_DIM], qs[DELTA_NET_MAX_DIM];
    for (int t = 0; t < io->n; t++) {
        const float *q = io->q + t * kstride + (size_t)kh * D;
        const float *k = io->k + t * kstride + (size_t)kh * D;
        const float *v = io->v + t * vstride + (size_t)head * D;
        float *o = io->out + t * vstride + (size_t)head * D;
        float decay = expf(io->g[(size_t)t * d->n_v_heads + head]);
        float beta = io->beta[(size_t)t * d->n_v_heads + head];
        /* delta = beta (v - decay S^T k), then S = decay S + k delta^T and
         * o = S^T q / sqrt(D) in the same pass over S. */
        memset(delta, 0, (size_t)D * sizeof *delta);
        kern->gemm(delta, 0, k, 0, S, (size_t)D, 1, D, D);
        for (int i = 0; i < D; i++) {
            delta[i] = beta * (v[i] - decay * delta[i]);
            qs[i] = q[i] * scale;
        }
        memset(o, 0, (size_t)D * sizeof *o);
        kern->decay_update(S, D, D, decay, k, delta, qs, o);
    }
}

size_t delta_net_chunk_scratch(const struct delta_net_dims *d, int chunk) {
    size_t C = (size_t)chunk, D = (size_t)d->head_dim;
    return 2 * C           /* G, decay to the chunk's end */
         + 3 * C * C       /* k_t . k_j, q_t . k_j, the output's coefficients */
         + 4 * C * D;      /* [W | Y] rows (W becomes u), the keys transposed, the scaled queries */
}

/* One chunk of c tokens at t0 for one head, as products of small matrices
 * (kern->gemm): the key products, the forward substitution row by row, then
 * u = W - Y S0, o = Q S0 + P u and S = exp(G_last) S0 + K' u, one product
 * each for the whole chunk. */
static void chunk_step(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                       const struct delta_net_io *io, int head, int t0, int c, float *scratch) {
    int D = d->head_dim, kh = head % d->n_k_heads, H = d->n_v_heads;
    size_t kstride = (size_t)d->n_k_heads * D, vstride = (size_t)H * D, wy = 2 * (size_t)D;
    float scale = 1.0f / sqrtf((float)D);
    float *S = io->state + (size_t)head * D * D;
    float *G = scratch, *to_end = G + c, *KK = to_end + c, *QK = KK + (size_t)c * c, *P = QK + (size_t)c * c;
    float *WY = P + (size_t)c * c;        /* (c, 2D): row t is [W_t | Y_t] */
    float *KT = WY + (size_t)c * wy;      /* (D, c) */
    float *QS = KT + (size_t)D * c;       /* (c, D) */
    const float *K0 = io->k + (size_t)t0 * kstride + (size_t)kh * D;   /* rows kstride apart */
    const float *Q0 = io->q + (size_t)t0 * kstride + (size_t)kh * D;
    float *O0 = io->out + (size_t)t0 * vstride + (size_t)head * D;     /* rows vstride apart */
    double acc = 0;
    for (int t = 0; t < c; t++) {
        acc += io->g[(size_t)(t0 + t) * H + head];
        G[t] = (float)acc;
    }
    for (int t = 0; t < c; t++) to_end[t] = expf(G[c - 1] - G[t]);
    /* Key-key and query-key products of the chunk. */
    for (int j = 0; j < c; j++)
        for (int m = 0; m < D; m++) KT[(size_t)m * c + j] = K0[(size_t)j * kstride + m];
    memset(KK, 0, 2 * (size_t)c * c * sizeof *KK);
    kern->gemm(KK, (size_t)c, K0, kstride, KT, (size_t)c, c, D, c);
    kern->gemm(QK, (size_t)c, Q0, kstride, KT, (size_t)c, c, D, c);
    /* W_t = beta_t v_t and Y_t = beta_t exp(G_t) k_t, minus the earlier rows
     * of the chunk (forward substitution), both halves of a row at once. */
    for (int t = 0; t < c; t++) {
        float beta = io->beta[(size_t)(t0 + t) * H + head];
        const float *kt = K0 + (size_t)t * kstride;
        const float *v = io->v + (size_t)(t0 + t) * vstride + (size_t)head * D;
        float *w = WY + (size_t)t * wy, *y = w + D, ey = beta * expf(G[t]);
        for (int i = 0; i < D; i++) { w[i] = beta * v[i]; y[i] = ey * kt[i]; }
        float *l = P + (size_t)t * c; /* P is filled below */
        for (int j = 0; j < t; j++) l[j] = -beta * expf(G[t] - G[j]) * KK[(size_t)t * c + j];
        kern->gemm(w, 0, l, 0, WY, wy, 1, t, 2 * D);
    }
    /* u_t = W_t - S0^T Y_t (kept in W), and
     * o_t = (exp(G_t) S0^T q_t + sum_{j<=t} exp(G_t - G_j) (q_t . k_j) u_j) / sqrt(D). */
    for (int t = 0; t < c; t++) {
        float *y = WY + (size_t)t * wy + D, *qs = QS + (size_t)t * D, e = scale * expf(G[t]);
        const float *qt = Q0 + (size_t)t * kstride;
        for (int m = 0; m < D; m++) { y[m] = -y[m]; qs[m] = e * qt[m]; }
        for (int j = 0; j < c; j++) P[(size_t)t * c + j] = j <= t ? scale * expf(G[t] - G[j]) * QK[(size_t)t * c + j] : 0.0f;
        memset(O0 + (size_t)t * vstride, 0, (size_t)D * sizeof *O0);
    }
    kern->gemm(WY, wy, WY + D, wy, S, (size_t)D, c, D, D);
    kern->gemm(O0, vstride, QS, (size_t)D, S, (size_t)D, c, D, D);
    kern->gemm(O0, vstride, P, (size_t)c, WY, wy, c, c, D);
    /* S = exp(G_last) S0 + sum_j (exp(G_last - G_j) k_j) u_j^T. */
    float e_last = expf(G[c - 1]);
    for (size_t i = 0; i < (size_t)D * D; i++) S[i] *= e_last;
    for (int m = 0; m < D; m++)
        for (int j = 0; j < c; j++) KT[(size_t)m * c + j] *= to_end[j];
    kern->gemm(S, (size_t)D, KT, (size_t)c, WY, wy, D, c, D);
}

void delta_net_chunked(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                       const struct delta_net_io *io, int head, int chunk, float *scratch) {
    for (int t0 = 0; t0 < io->n; t0 += chunk) {
        int c = io->n - t0 < chunk ? io->n - t0 : chunk;
        chunk_step(kern, d, io, head, t0, c, scratch);
    }
}

size_t delta_net_run_scratch(const struct delta_net_dims *d, int threads) {
    return (size_t)threads * delta_net_chunk_scratch(d, DELTA_NET_CHUNK);
}

/* The form for the batch's length: recurrent for one token, else chunked. */
static void run_head(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                     const struct delta_net_io *io, int head, float *scratch) {
    if (io->n == 1) delta_net_recurrent(kern, d, io, head);
    else delta_net_chunked(kern, d, io, head, DELTA_NET_CHUNK, scratch);
}

struct run_job {
    const struct delta_net_kernels *kern;
    const struct delta_net_dims *d;
    const struct delta_net_io *io;     /* (n_io) */
    float *scratch;
};

/* Item i: head i % n_v_heads of batch i / n_v_heads. */
static void run_heads(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct run_job *j = arg;
    float *scratch = j->scratch + (size_t)thread_index * delta_net_chunk_scratch(j->d, DELTA_NET_CHUNK);
    for (int64_t item = begin; item < end; item++)
        run_head(j->kern, j->d, &j->io[item / j->d->n_v_heads], (int)(item % j->d->n_v_heads), scratch);
}

void delta_net_run_many(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                        int n_io, float *scratch) {
    struct run_job j = { delta_net_kernels(), d, io, scratch };
    threadpool_parallel_for(pool, (int64_t)n_io * d->n_v_heads, 1, run_heads, &j);
}

void delta_net_run(struct threadpool *pool, const struct delta_net_dims *d, const struct delta_net_io *io,
                   float *scratch) {
    delta_net_run_many(pool, d, io, 1, scratch);
}

/* After a batch of n inputs x (rows ldx apart) of `width` channels, the
 * state (rows ldstate apart) keeps the last K-1 of them. */
static void conv_state_advance(float *state, size_t ldstate, const float *x, size_t ldx, int n, int width, int K) {
    int past = K - 1;
    for (int r = 0; r < past; r++) {
        int src = n - past + r; /* input index of state row r after the batch */
        float *dst = state + (size_t)r * ldstate;
        if (src >= 0) memcpy(dst, x + (size_t)src * ldx, (size_t)width * sizeof *dst);
        else memmove(dst, state + (size_t)(r + n) * ldstate, (size_t)width * sizeof *dst);
    }
}

void delta_net_conv_silu(const float *x, int n, int channels, int K, const float *w, float *conv_state,
                         float *out) {
    size_t ch = (size_t)channels;
    delta_net_kernels()->conv_silu(x, ch, conv_state, ch, n, channels, K, w, out, ch);
    conv_state_advance(conv_state, ch, x, ch, n, channels, K);
}

/* l2_norm_rows over rows `stride` floats apart. */
static void l2_norm_strided(float *v, int n, int len, size_t stride, float eps) {
    for (int r = 0; r < n; r++) {
        float *x = v + (size_t)r * stride;
        double sum = 0;
        for (int i = 0; i < len; i++) sum += (double)(x[i] * x[i]);
        float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int i = 0; i < len; i++) x[i] *= scale;
    }
}

void l2_norm_rows(float *v, int n, int len, float eps) { l2_norm_strided(v, n, len, (size_t)len, eps); }

static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* g = softplus(alpha + dt_bias) a and beta = sigmoid(b) of n tokens, one
 * head: entries `stride` apart. */
static void gates_strided(float *alpha, float *b, int n, size_t stride, float dt_bias, float a) {
    for (int t = 0; t < n; t++) {
        size_t i = (size_t)t * stride;
        alpha[i] = softplus(alpha[i] + dt_bias) * a;
        b[i] = 1.0f / (1.0f + expf(-b[i]));
    }
}

void delta_net_gates(float *alpha, float *b, int n, int n_v_heads, const float *dt_bias, const float *a) {
    for (int h = 0; h < n_v_heads; h++) gates_strided(alpha + h, b + h, n, (size_t)n_v_heads, dt_bias[h], a[h]);
}

void gated_rms_norm_rows(float *o, const float *z, const float *w, int n, int len, float eps) {
    const struct delta_net_kernels *kern = delta_net_kernels();
    for (int r = 0; r < n; r++) kern->gated_norm(o + (size_t)r * len, z + (size_t)r * len, w, len, eps);
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
    float *mixed;                      /* (n_batch, channels) the qkv projection */
    float *q, *k;                      /* (n_batch, n_k_heads D) convolved */
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
    s->q = malloc(B * kd * 4);
    s->k = malloc(B * kd * 4);
    s->v = malloc(B * vd * 4);
    s->z = malloc(B * vd * 4);
    s->o = malloc(B * vd * 4);
    s->g = malloc(B * sh->dims.n_v_heads * 4);
    s->beta = malloc(B * sh->dims.n_v_heads * 4);
    s->run = malloc(delta_net_run_scratch(&sh->dims, threads) * 4);
    if (!s->mixed || !s->q || !s->k || !s->v || !s->z || !s->o || !s->g || !s->beta || !s->run) {
        delta_net_scratch_free(s);
        return NULL;
    }
    return s;
}

void delta_net_scratch_free(struct delta_net_scratch *s) {
    if (!s) return;
    free(s->mixed); free(s->q); free(s->k); free(s->v); free(s->z); free(s->o);
    free(s->g); free(s->beta); free(s->run);
    free(s);
}

/* One layer's pass over the pool: its convolution by blocks of head_dim
 * channels (a q, k or v head), then its heads. */
struct layer_job {
    const struct delta_net_kernels *kern;
    const struct context *c;
    const struct delta_net_shape *sh;
    const struct delta_net_weights *w;
    struct delta_net_scratch *s;
    int layer, n;                      /* n: rows of the pass */
};

/* Block b of the channels over every run: convolution + SiLU into q, k or v
 * (q and k then L2-normalised), its columns of each run's conv state advanced. */
static void conv_blocks(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    const struct layer_job *j = arg;
    const struct delta_net_dims *d = &j->sh->dims;
    int D = d->head_dim, K = j->sh->conv_kernel, Hk = d->n_k_heads;
    size_t ch = (size_t)channels(j->sh), kd = (size_t)Hk * D, vd = (size_t)d->n_v_heads * D;
    for (int64_t b = begin; b < end; b++) {
        size_t c0 = (size_t)b * D;
        float *dst;
        size_t ld;
        if (b < Hk) { dst = j->s->q + c0; ld = kd; }
        else if (b < 2 * Hk) { dst = j->s->k + (c0 - kd); ld = kd; }
        else { dst = j->s->v + (c0 - 2 * kd); ld = vd; }
        const float *w = (const float *)j->w->conv.data + c0 * K;
        for (int r = 0; r < j->c->n_runs; r++) {
            const struct batch_run *run = &j->c->runs[r];
            size_t f = (size_t)run->first;
            const float *x = j->s->mixed + f * ch + c0;
            float *state = j->c->seqs[run->seq].layers[j->layer].conv + c0;
            j->kern->conv_silu(x, ch, state, ch, run->n, D, K, w, dst + f * ld, ld);
            conv_state_advance(state, ch, x, ch, run->n, D, K);
        }
        if (b < 2 * Hk) l2_norm_strided(dst, j->n, D, ld, j->sh->eps);
    }
}

/* Item i: value head i % n_v_heads of run i / n_v_heads: its gates, the
 * delta rule, the gated norm of its outputs. */
static void layer_heads(void *arg, int64_t begin, int64_t end, int thread_index) {
    const struct layer_job *j = arg;
    const struct delta_net_dims *d = &j->sh->dims;
    struct delta_net_scratch *s = j->s;
    int D = d->head_dim, H = d->n_v_heads;
    size_t kd = (size_t)d->n_k_heads * D, vd = (size_t)H * D;
    float *scratch = s->run + (size_t)thread_index * delta_net_chunk_scratch(d, DELTA_NET_CHUNK);
    for (int64_t item = begin; item < end; item++) {
        const struct batch_run *run = &j->c->runs[item / H];
        int h = (int)(item % H);
        size_t f = (size_t)run->first;
        gates_strided(s->g + f * H + h, s->beta + f * H + h, run->n, (size_t)H, j->w->dt_bias[h], j->w->a[h]);
        struct delta_net_io io = { run->n, s->q + f * kd, s->k + f * kd, s->v + f * vd, s->g + f * H,
                                   s->beta + f * H, j->c->seqs[run->seq].layers[j->layer].recurrent, s->o + f * vd };
        run_head(j->kern, d, &io, h, scratch);
        for (int t = 0; t < run->n; t++) {
            size_t row = (f + t) * vd + (size_t)h * D;
            j->kern->gated_norm(s->o + row, s->z + row, j->w->norm, D, j->sh->eps);
        }
    }
}

void delta_net_layer(struct context *c, const struct delta_net_shape *sh, const struct delta_net_weights *w,
                     struct delta_net_scratch *s, int layer, int n, const float *xn, float *out) {
    const struct delta_net_dims *d = &sh->dims;
    int64_t t0 = time_ns();
    const struct matrix *proj[4] = { &w->qkv, &w->z, &w->beta, &w->alpha };
    float *proj_out[4] = { s->mixed, s->z, s->beta, s->g };
    project_rows(c, proj, proj_out, 4, xn, n);
    int64_t t1 = time_ns();
    struct layer_job j = { delta_net_kernels(), c, sh, w, s, layer, n };
    /* A decode step's convolution is a few microseconds: no job for it. */
    threadpool_parallel_for(n > 1 ? c->pool : NULL, 2 * d->n_k_heads + d->n_v_heads, 1, conv_blocks, &j);
    threadpool_parallel_for(c->pool, (int64_t)c->n_runs * d->n_v_heads, 1, layer_heads, &j);
    int64_t t2 = time_ns();
    dense_matmul(c, &w->out, s->o, n, out);
    int64_t t3 = time_ns();
    c->times.ns[OP_ATTN_MATMUL] += (t1 - t0) + (t3 - t2);
    c->times.ns[OP_DELTA_NET] += t2 - t1;
}
