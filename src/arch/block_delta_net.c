/* The gated delta rule in chunks aligned to the sequence.
 *
 * The state of a head is stored key-major, S[m][i] for key dim m and value
 * dim i, so that every product with it is a sum of its rows scaled by a
 * key's or query's components (rows of a small gemm over the value dims:
 * delta_net_kernels.h, one build per ISA).
 *
 * Chunks of DELTA_NET_CHUNK tokens start at positions counted from the
 * sequence's start, whatever the passes: S is the state at the start of the
 * current chunk, and the chunk's tokens so far keep their keys, their
 * updates u and their log decays beside it. In a chunk starting from S0,
 * with G_t the running sum of g inside the chunk, token t adds
 * u_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t), so that
 * S_t = exp(G_t) S0 + sum_{j<=t} exp(G_t - G_j) k_j u_j^T and
 *     u_t = beta_t v_t - S0^T (beta_t exp(G_t) k_t) - sum_{j<t} beta_t exp(G_t - G_j) (k_t . k_j) u_j
 *     o_t = (exp(G_t) S0^T q_t + sum_{j<=t} exp(G_t - G_j) (q_t . k_j) u_j) / sqrt(D),
 * a forward substitution row by row. A token's u and o are computed by the
 * same operations in the same order whether its pass holds the whole chunk
 * or only that token (the products with S0 are gemm rows, each element its
 * own chain of multiply-adds; the sums over j run row by row over exactly
 * j < t or j <= t), and S moves on only when a chunk is complete: a
 * sequence's outputs and state do not depend on how it was split into
 * passes, bit for bit. A decode step costs about what the plain recurrence
 * did: two products of a row with S0, and one product of the chunk with S
 * every DELTA_NET_CHUNK tokens. */
#include "arch/block_delta_net.h"

#include "arch/block_proj.h"
#include "quant/delta_net_kernels.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/context_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK = DELTA_NET_CHUNK };

size_t delta_net_head_floats(const struct delta_net_dims *d) {
    size_t D = (size_t)d->head_dim;
    return D * D + CHUNK * (2 * D + 1);
}

/* One value head's part of the state. */
struct head_state {
    float *S;   /* (D key, D value) at the start of the current chunk */
    float *K;   /* (CHUNK, D) the chunk's keys so far */
    float *U;   /* (CHUNK, D) their updates u */
    float *g;   /* (CHUNK) their log decays */
};

static struct head_state head_state(const struct delta_net_dims *d, float *state, int head) {
    size_t D = (size_t)d->head_dim;
    float *S = state + (size_t)head * delta_net_head_floats(d);
    return (struct head_state){ S, S + D * D, S + D * D + CHUNK * D, S + D * D + 2 * CHUNK * D };
}

size_t delta_net_head_scratch(const struct delta_net_dims *d) {
    size_t D = (size_t)d->head_dim;
    return 3 * CHUNK          /* G, one row's decays and coefficients */
         + 4 * CHUNK * D      /* the rows that meet S0 (-beta exp(G) k, then the scaled queries), their products */
         + D * CHUNK;         /* the keys scaled to the chunk's end, transposed */
}

/* Rows a..b-1 of the current chunk, from the batch's tokens i0.. (rows
 * 0..a-1 are in the head's state); at the chunk's end, S moves on. */
static void chunk_rows(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                       const struct delta_net_io *io, int head, int i0, int a, int b, float *scratch) {
    const int D = d->head_dim, kh = head % d->n_k_heads, H = d->n_v_heads, rows = b - a;
    const size_t kstride = (size_t)d->n_k_heads * D, vstride = (size_t)H * D;
    const float scale = 1.0f / sqrtf((float)D);
    const struct head_state st = head_state(d, io->state, head);
    float *G = scratch, *decay = G + CHUNK, *coef = decay + CHUNK;
    float *A = coef + CHUNK;                  /* (2 rows, D): rows - beta_t exp(G_t) k_t, then exp(G_t) q_t / sqrt(D) */
    float *Y = A + 2 * (size_t)CHUNK * D;     /* (2 rows, D): their products with S0, onto beta_t v_t and 0 */
    float *KT = Y + 2 * (size_t)CHUNK * D;    /* (D, CHUNK) */
    float *O = io->out + (size_t)i0 * vstride + (size_t)head * D; /* row a, rows vstride apart */
    for (int t = a; t < b; t++) {
        size_t i = (size_t)(i0 + t - a);
        memcpy(st.K + (size_t)t * D, io->k + i * kstride + (size_t)kh * D, (size_t)D * sizeof *st.K);
        st.g[t] = io->g[i * H + head];
    }
    double acc = 0;
    for (int t = 0; t < b; t++) {
        acc += st.g[t];
        G[t] = (float)acc;
    }
    /* u_t = beta_t v_t - S0^T (beta_t exp(G_t) k_t) and exp(G_t) S0^T q_t / sqrt(D):
     * the products of the rows with S0, in one pass over it */
    for (int t = a; t < b; t++) {
        size_t i = (size_t)(i0 + t - a), r = (size_t)(t - a);
        const float *k = st.K + (size_t)t * D, *q = io->q + i * kstride + (size_t)kh * D;
        const float *v = io->v + i * vstride + (size_t)head * D;
        const float beta = io->beta[i * H + head], ey = beta * expf(G[t]), eq = scale * expf(G[t]);
        float *ny = A + r * D, *qs = A + (rows + r) * D, *u = Y + r * D;
        for (int m = 0; m < D; m++) {
            u[m] = beta * v[m];
            ny[m] = -(ey * k[m]);
            qs[m] = eq * q[m];
        }
    }
    memset(Y + (size_t)rows * D, 0, (size_t)rows * D * sizeof *Y);
    kern->gemm(Y, (size_t)D, A, (size_t)D, st.S, (size_t)D, 2 * rows, D, D);
    memcpy(st.U + (size_t)a * D, Y, (size_t)rows * D * sizeof *Y);
    for (int r = 0; r < rows; r++)
        memcpy(O + (size_t)r * vstride, Y + (size_t)(rows + r) * D, (size_t)D * sizeof *O);
    /* then the chunk's earlier updates, row by row */
    for (int t = a; t < b; t++) {
        size_t i = (size_t)(i0 + t - a);
        const float *k = st.K + (size_t)t * D, *q = io->q + i * kstride + (size_t)kh * D;
        const float beta = io->beta[i * H + head];
        for (int j = 0; j <= t; j++) decay[j] = expf(G[t] - G[j]);
        for (int j = 0; j < t; j++) coef[j] = -beta * decay[j] * kern->dot(k, st.K + (size_t)j * D, D);
        kern->gemm(st.U + (size_t)t * D, 0, coef, 0, st.U, (size_t)D, 1, t, D);
        for (int j = 0; j <= t; j++) coef[j] = scale * decay[j] * kern->dot(q, st.K + (size_t)j * D, D);
        kern->gemm(O + (size_t)(t - a) * vstride, 0, coef, 0, st.U, (size_t)D, 1, t + 1, D);
    }
    if (b < CHUNK) return;
    /* S = exp(G_last) S0 + sum_j (exp(G_last - G_j) k_j) u_j^T */
    const float e_last = expf(G[CHUNK - 1]);
    for (size_t i = 0; i < (size_t)D * D; i++) st.S[i] *= e_last;
    for (int j = 0; j < CHUNK; j++) {
        const float to_end = expf(G[CHUNK - 1] - G[j]);
        for (int m = 0; m < D; m++) KT[(size_t)m * CHUNK + j] = st.K[(size_t)j * D + m] * to_end;
    }
    kern->gemm(st.S, (size_t)D, KT, CHUNK, st.U, (size_t)D, D, CHUNK, D);
}

void delta_net_head(const struct delta_net_kernels *kern, const struct delta_net_dims *d,
                    const struct delta_net_io *io, int head, float *scratch) {
    int a = io->pos0 % CHUNK;
    for (int i = 0; i < io->n; a = 0) {
        int b = io->n - i < CHUNK - a ? a + (io->n - i) : CHUNK;
        chunk_rows(kern, d, io, head, i, a, b, scratch);
        i += b - a;
    }
}

size_t delta_net_run_scratch(const struct delta_net_dims *d, int threads) {
    return (size_t)threads * delta_net_head_scratch(d);
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
    float *scratch = j->scratch + (size_t)thread_index * delta_net_head_scratch(j->d);
    for (int64_t item = begin; item < end; item++)
        delta_net_head(j->kern, j->d, &j->io[item / j->d->n_v_heads], (int)(item % j->d->n_v_heads), scratch);
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
    return (int64_t)s->dims.n_v_heads * (int64_t)delta_net_head_floats(&s->dims);
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
    float *scratch = s->run + (size_t)thread_index * delta_net_head_scratch(d);
    for (int64_t item = begin; item < end; item++) {
        const struct batch_run *run = &j->c->runs[item / H];
        int h = (int)(item % H);
        size_t f = (size_t)run->first;
        gates_strided(s->g + f * H + h, s->beta + f * H + h, run->n, (size_t)H, j->w->dt_bias[h], j->w->a[h]);
        struct delta_net_io io = { run->n, run->pos0, s->q + f * kd, s->k + f * kd, s->v + f * vd, s->g + f * H,
                                   s->beta + f * H, j->c->seqs[run->seq].layers[j->layer].recurrent, s->o + f * vd };
        delta_net_head(j->kern, d, &io, h, scratch);
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
