#include "synth/synth_design.h"

#include "core/error.h"
#include "moe/routing_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLK_U, BLK_F, BLK_S, BLK_J };

/* Random part of every weight that is not meant to read or write a block,
 * relative to the part that is: keeps every matrix dense without disturbing
 * the design. */
#define LEAK 0.03f
#define EMBD_J_VAR 0.25f          /* variance of the embedding's J coordinates */
#define NORM_JITTER 0.05f         /* RMSNorm weights are 1 +- this */
#define QK_NOISE 0.02f            /* random part of q and k next to their constant part */
#define QK_HEAD_JITTER 0.1f       /* per head and pair, so heads differ a little */
#define ROUTER_SCALE 1.0f         /* std of a router logit's token-to-token variation */
#define OUTPUT_STD 2.5f           /* std of the output logits over the vocabulary */
#define UNUSED_LOGIT -20.0f       /* unused ([PAD]) tokens are never sampled */
#define GATE_STD 1.0f             /* std of the experts' gate and up pre-activations */
#define UP_STD 1.0f
/* The attention window: pair p of a head gets weight w_p in q.k, a bump in
 * ln(frequency) around KERNEL_CENTER rad/position, so that the score of a key
 * d positions back falls smoothly from 0 to about -KERNEL_DEPTH over a few
 * dozen positions and stays low further back. */
#define KERNEL_CENTER 0.015
#define KERNEL_WIDTH 0.7
#define KERNEL_DEPTH 12.0
#define KERNEL_STEADY_LEN 512     /* sequence length the window's variance is taken at */
#define LONG_PAIR_WEIGHT 1e-6     /* pairs weighing less (relative) carry the "long" heads' queries */
#define ZIPF_ITERS 40
#define ZIPF_VALUES (1 << 21)     /* samples x experts of the calibration */

/* Streams of the counter-based generator besides the tensors' own. */
enum { STREAM_BLOCKS = 1 << 20, STREAM_U0, STREAM_ZIPF, STREAM_RANK, STREAM_QK_JITTER = STREAM_RANK + 4096 };

struct layer_design {
    float rho_attn, rho_ffn;  /* rms of the residual at the attention and FFN norms */
    float static_gain;        /* router weight along u0 per unit of static logit */
    float *fast_scale;        /* (n_expert) router weight on F per unit of raw draw */
    float *slow_scale;        /* (n_expert) the same on S */
};

struct synth_design {
    struct synth_params p;
    int V, D, E, K, FF, hd, nq, nkv, n_rep;
    uint8_t *block;           /* (D) BLK_* of each residual coordinate */
    int32_t *block_coords[4]; /* the coordinates of each block, ascending */
    float *u0;                /* (D) unit vector on the U coordinates */
    int n_blk[4];
    float alpha;              /* |U part of every token's residual| */
    float *rank_logit;        /* (E) static router logit of each popularity rank */
    float weight_sq;          /* mean sum of squared top-k routing weights */
    int32_t *rank;            /* (n_layers, E) popularity rank of each expert */
    float *qk_norm;           /* (head_dim) q and k norm weights */
    uint8_t *long_pair;       /* (head_dim / 2) pairs the window ignores */
    uint8_t *head_long;       /* (n_head) 1: a "long" head (average of the whole past) */
    int32_t *value_src;       /* (n_head_kv) kv group whose values this group copies */
    int32_t *n_short, *n_long;/* (n_head_kv) heads of each kind reading a source group */
    int n_src;                /* distinct value sources */
    float window_var;         /* variance of (window - long) average of unit values */
    float out_scale;          /* attn_output weight on S per unit of draw */
    float layer_var;          /* variance each layer adds to S and to J coordinates */
    struct layer_design *layer;
    float rho_out, out_var_s, out_var_j;
    float down_scale;
    const int32_t *token_types;
};

/* ---- counter-based random numbers: a value depends only on (seed, stream, row, column) ---- */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

struct rng { uint64_t s; };

static inline struct rng rng_at(uint64_t seed, uint64_t stream, uint64_t row) {
    struct rng r = { mix64(seed ^ mix64(stream * 0x9E3779B97F4A7C15ULL ^ mix64(row + 0x632BE59BD9B4E019ULL))) };
    return r;
}

static inline uint64_t rng_u64(struct rng *r) { return mix64(r->s += 0x9E3779B97F4A7C15ULL); }

/* Zero mean, unit variance, nearly normal: the sum of four 16-bit uniforms
 * (one 64-bit draw per value; tails end at 3.5 sigma). */
static inline float rng_gauss(struct rng *r) {
    uint64_t x = rng_u64(r);
    int32_t s = (int32_t)((x & 0xffff) + ((x >> 16) & 0xffff) + ((x >> 32) & 0xffff) + (x >> 48));
    return (float)(s - 131070) * (1.7320508f / 65536.0f);
}

static uint64_t tensor_stream(enum synth_kind k, int layer) { return (uint64_t)k << 32 | (uint32_t)layer; }

/* ---- router calibration ---- */

/* Inserts (v, i) into the descending top-k list. */
static inline void topk_push(float *val, int *idx, int k, float v, int i) {
    if (v <= val[k - 1]) return;
    int j = k - 1;
    while (j > 0 && val[j - 1] < v) { val[j] = val[j - 1]; idx[j] = idx[j - 1]; j--; }
    val[j] = v;
    idx[j] = i;
}

/* Finds static logits a[rank] such that top-k of (a + z), z standard normal
 * per expert, picks each rank with its target share: a fixed-point iteration
 * on a fixed sample. Also measures the mean sum of squared routing weights. */
static int calibrate_router(struct synth_design *d) {
    int E = d->E, K = d->K, M = ZIPF_VALUES / E;
    if (M < 2048) M = 2048;
    double *target = malloc((size_t)E * sizeof *target), *count = malloc((size_t)E * sizeof *count);
    float *z = malloc((size_t)M * E * sizeof *z), *val = malloc((size_t)K * sizeof *val);
    int *idx = malloc((size_t)K * sizeof *idx);
    if (!target || !count || !z || !val || !idx) {
        free(target); free(count); free(z); free(val); free(idx);
        return moex_errorf("synth: out of memory");
    }
    for (int m = 0; m < M; m++) {
        struct rng r = rng_at(d->p.seed, STREAM_ZIPF, (uint64_t)m);
        for (int e = 0; e < E; e++) z[(size_t)m * E + e] = rng_gauss(&r);
    }
    float *a = d->rank_logit;
    for (int e = 0; e < E; e++) a[e] = 0;
    bool calibrate = d->p.skew > 0 && K < E;
    if (calibrate) {
        routing_zipf_shares(E, K, d->p.skew, target);
        for (int e = 0; e < E; e++) a[e] = (float)(0.5 * log(target[e] * E));
    }
    for (int it = 0; it <= (calibrate ? ZIPF_ITERS : 0); it++) {
        bool last = !calibrate || it == ZIPF_ITERS;
        double wsq = 0;
        memset(count, 0, (size_t)E * sizeof *count);
        for (int m = 0; m < M; m++) {
            const float *zm = z + (size_t)m * E;
            for (int k = 0; k < K; k++) { val[k] = -INFINITY; idx[k] = 0; }
            for (int e = 0; e < E; e++) topk_push(val, idx, K, a[e] + zm[e], e);
            for (int k = 0; k < K; k++) count[idx[k]] += 1;
            if (last) {
                double sum = 0, sq = 0;
                for (int k = 0; k < K; k++) sum += exp(ROUTER_SCALE * (val[k] - val[0]));
                for (int k = 0; k < K; k++) { double w = exp(ROUTER_SCALE * (val[k] - val[0])) / sum; sq += w * w; }
                wsq += sq;
            }
        }
        if (last) { d->weight_sq = (float)(wsq / M); break; }
        for (int e = 0; e < E; e++) {
            double share = (count[e] + 0.5) / ((double)M * K);
            a[e] += (float)(0.7 * log(target[e] / share));
        }
    }
    double mean = 0;
    for (int e = 0; e < E; e++) mean += a[e];
    for (int e = 0; e < E; e++) a[e] -= (float)(mean / E);
    free(target); free(count); free(z); free(val); free(idx);
    return 0;
}

/* ---- attention heads ---- */

/* Which heads are "long" (their query sits on pairs the window ignores, so
 * they average the whole past) and which kv group's values each group reads.
 * Every value channel is read by short and long heads alike and the output
 * projection takes short minus long: S follows recent tokens and has no
 * constant part, whatever the text's token frequencies. */
static void design_heads(struct synth_design *d) {
    int H = d->p.n_head, HK = d->p.n_head_kv, rep = d->n_rep;
    int any_long_pair = 0;
    for (int p = 0; p < d->hd / 2; p++) any_long_pair |= d->long_pair[p];
    for (int g = 0; g < HK; g++) d->value_src[g] = rep == 1 ? g - g % 2 : g;
    for (int h = 0; h < H; h++) {
        int is_long = rep >= 2 ? (h % rep) % 2 == 1 : h % 2 == 1;
        d->head_long[h] = (uint8_t)(is_long && any_long_pair);
    }
    memset(d->n_short, 0, (size_t)HK * sizeof *d->n_short);
    memset(d->n_long, 0, (size_t)HK * sizeof *d->n_long);
    for (int h = 0; h < H; h++) {
        int src = d->value_src[h / rep];
        if (d->head_long[h]) d->n_long[src]++;
        else d->n_short[src]++;
    }
    d->n_src = 0;
    for (int g = 0; g < HK; g++) d->n_src += d->value_src[g] == g;
}

/* ---- attention window ---- */

static void design_window(struct synth_design *d) {
    int half = d->hd / 2;
    double *w = malloc((size_t)half * sizeof *w), *theta = malloc((size_t)half * sizeof *theta);
    double sum = 0;
    for (int p = 0; p < half; p++) {
        theta[p] = pow(d->p.rope_base, -2.0 * p / d->hd);
        double x = (log(theta[p]) - log(KERNEL_CENTER)) / KERNEL_WIDTH;
        w[p] = exp(-0.5 * x * x);
        sum += w[p];
    }
    for (int p = 0; p < half; p++) {
        d->long_pair[p] = (uint8_t)(w[p] < LONG_PAIR_WEIGHT * sum);
        w[p] *= KERNEL_DEPTH / sum;
        /* score = sum_i q_i k_i cos(theta_i d) / sqrt(hd), pair p = dims p, p + hd/2 */
        float qk = (float)sqrt(w[p] * sqrt((double)d->hd) / 2);
        d->qk_norm[p] = d->qk_norm[p + half] = qk;
    }
    /* Variance of the window average of unit-variance values minus (when there
     * are long heads) the average of all of them, averaged over the positions
     * of a KERNEL_STEADY_LEN sequence: near its start both averages cover the
     * same few tokens and the difference is small. */
    double *a = malloc(KERNEL_STEADY_LEN * sizeof *a);
    for (int t = 0; t < KERNEL_STEADY_LEN; t++) {
        double s = 0;
        for (int p = 0; p < half; p++) s += w[p] * (cos(theta[p] * t) - 1);
        a[t] = exp(s);
    }
    design_heads(d);
    int any_long = 0;
    for (int h = 0; h < d->p.n_head; h++) any_long |= d->head_long[h];
    double var = 0, z = 0;
    for (int t = 0; t < KERNEL_STEADY_LEN; t++) {
        z += a[t];
        double flat = any_long ? 1.0 / (t + 1) : 0;
        for (int back = 0; back <= t; back++) var += (a[back] / z - flat) * (a[back] / z - flat);
    }
    var /= KERNEL_STEADY_LEN;
    d->window_var = (float)var;
    free(a);
    free(w);
    free(theta);
}

/* ---- residual energy model ---- */

/* E[silu(a)^2] for a ~ N(0, s^2), by quadrature. */
static double silu_sq_mean(double s) {
    double sum = 0, h = 0.01;
    for (double x = -10; x <= 10; x += h) {
        double a = x * s, silu = a / (1 + exp(-a));
        sum += silu * silu * exp(-0.5 * x * x);
    }
    return sum * h / sqrt(2 * M_PI);
}

/* Per-coordinate variances: U 1, F 1, S and J grow by layer_var per layer. */
/* Whether layer l has attention (the others of a hybrid write no S). */
static bool attends(const struct synth_design *d, int l) {
    return !d->p.attention_layers || (l < 64 && (d->p.attention_layers >> l & 1));
}

static void design_energy(struct synth_design *d) {
    int L = d->p.n_layers, D = d->D, n_attn = 0;
    double nU = d->n_blk[BLK_U], nF = d->n_blk[BLK_F], nS = d->n_blk[BLK_S], nJ = d->n_blk[BLK_J];
    double inc = L > 4 ? 4.0 / L : 1.0;
    for (int l = 0; l < L; l++) n_attn += attends(d, l);
    /* A hybrid's attention layers write the S of the layers they stand for. */
    double inc_s = n_attn == L || n_attn == 0 ? inc : inc * L / n_attn;
    double var_s = (double)LEAK * LEAK, var_j = EMBD_J_VAR;
    d->layer_var = (float)inc;
    for (int l = 0; l < L; l++) {
        d->layer[l].rho_attn = (float)sqrt((nU + nF + nS * var_s + nJ * var_j) / D);
        if (attends(d, l)) var_s += inc_s;
        d->layer[l].rho_ffn = (float)sqrt((nU + nF + nS * var_s + nJ * var_j) / D);
        var_j += inc;
    }
    d->rho_out = (float)sqrt((nU + nF + nS * var_s + nJ * var_j) / D);
    d->out_var_s = (float)var_s;
    d->out_var_j = (float)var_j;
    d->out_scale = (float)sqrt(inc_s / ((double)d->n_src * d->hd * d->window_var));
    d->down_scale = (float)sqrt(inc / (d->FF * silu_sq_mean(GATE_STD) * UP_STD * UP_STD * d->weight_sq));
}

/* ---- raw draws shared by the row generators and the router's normalisation ---- */

/* attn_v: the row of value channel r reads the draws of its source group. */
static uint64_t value_row_source(const struct synth_design *d, int64_t r) {
    int64_t g = r / d->hd, c = r % d->hd;
    return (uint64_t)(d->value_src[g] * d->hd + c);
}

/* attn_output row of an S coordinate: one draw per value channel. */
static void out_draws(const struct synth_design *d, int layer, int64_t row, float *b) {
    struct rng r = rng_at(d->p.seed, tensor_stream(SK_ATTN_OUTPUT, layer), (uint64_t)row);
    for (int i = 0; i < d->nkv; i++) b[i] = rng_gauss(&r);
}

/* ---- router normalisation ---- */

/* Scales every router row so that, for this model's actual weights, the
 * expert's fast part has variance (1 - locality) and its slow part
 * locality (times ROUTER_SCALE^2): random rows alone would give each expert
 * a different noise level and bend the Zipf law. S is (window - long)
 * averages of F through attn_v and attn_output, summed over layers, so its
 * covariance is window_var * M M^T with M = sum over layers of
 * out_scale / sqrt(nF) * B_l * G_l. */
static int design_router(struct synth_design *d) {
    int nF = d->n_blk[BLK_F], nS = d->n_blk[BLK_S], D = d->D, hd = d->hd, nkv = d->nkv;
    const int32_t *F = d->block_coords[BLK_F], *S = d->block_coords[BLK_S], *U = d->block_coords[BLK_U];
    float *G = malloc((size_t)nkv * nF * sizeof *G);       /* (value channel, F) */
    float *B = malloc((size_t)nS * nkv * sizeof *B);       /* (S, value channel) */
    float *M = calloc((size_t)nS * nF, sizeof *M);         /* (S, F), summed over layers */
    float *row = malloc((size_t)(D > nkv ? D : nkv) * sizeof *row), *gn_a = malloc((size_t)D * sizeof *gn_a);
    float *gn_f = malloc((size_t)D * sizeof *gn_f);
    double *y = malloc((size_t)nF * sizeof *y);
    int rc = G && B && M && row && gn_a && gn_f && y ? 0 : moex_errorf("synth: out of memory");
    double w = d->p.locality;
    for (int l = 0; l < d->p.n_layers && rc == 0; l++) {
        struct layer_design *ld = &d->layer[l];
        synth_design_row(d, SK_ATTN_NORM, l, 0, gn_a);
        synth_design_row(d, SK_FFN_NORM, l, 0, gn_f);
        for (int v = 0; v < nkv && attends(d, l); v++) {
            struct rng r = rng_at(d->p.seed, tensor_stream(SK_ATTN_V, l), value_row_source(d, v));
            for (int c = 0; c < D; c++) row[c] = rng_gauss(&r);
            for (int j = 0; j < nF; j++) G[(size_t)v * nF + j] = row[F[j]] * gn_a[F[j]];
        }
        for (int i = 0; i < nS && attends(d, l); i++) out_draws(d, l, S[i], B + (size_t)i * nkv);
        /* Channels of groups that copy another group's values are zero in B's
         * use below: out rows read one draw per source channel. */
        float scale = d->out_scale / sqrtf((float)nF);
        for (int i = 0; i < nS && attends(d, l); i++) {
            float *m = M + (size_t)i * nF;
            for (int v = 0; v < nkv; v++) {
                if (d->value_src[v / hd] != v / hd) continue;
                float b = scale * B[(size_t)i * nkv + v];
                const float *g = G + (size_t)v * nF;
                for (int j = 0; j < nF; j++) m[j] += b * g[j];
            }
        }
        double u0gn = 0;
        for (int i = 0; i < d->n_blk[BLK_U]; i++) u0gn += (double)d->u0[U[i]] * d->u0[U[i]] * gn_f[U[i]];
        ld->static_gain = (float)(ld->rho_ffn / (d->alpha * u0gn));
        for (int e = 0; e < d->E; e++) {
            struct rng r = rng_at(d->p.seed, tensor_stream(SK_FFN_GATE_INP, l), (uint64_t)e);
            for (int c = 0; c < D; c++) row[c] = rng_gauss(&r);
            double fast = 0;
            for (int j = 0; j < nF; j++) fast += (double)row[F[j]] * gn_f[F[j]] * row[F[j]] * gn_f[F[j]];
            memset(y, 0, (size_t)nF * sizeof *y);
            for (int i = 0; i < nS; i++) {
                double ri = (double)row[S[i]] * gn_f[S[i]];
                const float *m = M + (size_t)i * nF;
                for (int j = 0; j < nF; j++) y[j] += ri * m[j];
            }
            double slow = 0;
            for (int j = 0; j < nF; j++) slow += y[j] * y[j];
            slow *= d->window_var;
            double rho2 = (double)ld->rho_ffn * ld->rho_ffn;
            /* No attention before this layer (a hybrid's first): no S, all fast. */
            double fast_share = slow > 0 ? 1 - w : 1;
            ld->fast_scale[e] = fast > 0 ? (float)(ROUTER_SCALE * sqrt(fast_share * rho2 / fast)) : 0;
            ld->slow_scale[e] = slow > 0 ? (float)(ROUTER_SCALE * sqrt(w * rho2 / slow)) : 0;
        }
    }
    free(G); free(B); free(M); free(row); free(gn_a); free(gn_f); free(y);
    return rc;
}

/* ---- setup ---- */

static void shuffle(int32_t *v, int n, struct rng *r) {
    for (int i = 0; i < n; i++) v[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_u64(r) % (uint64_t)(i + 1));
        int32_t t = v[i]; v[i] = v[j]; v[j] = t;
    }
}

struct synth_design *synth_design_new(const struct synth_params *p, int n_vocab, const int32_t *token_types) {
    struct synth_design *d = calloc(1, sizeof *d);
    if (!d) { moex_errorf("synth: out of memory"); return NULL; }
    d->p = *p;
    d->V = n_vocab;
    d->D = p->n_embd;
    d->E = p->n_expert;
    d->K = p->n_expert_used;
    d->FF = p->n_ff_exp;
    d->hd = p->head_dim;
    d->nq = p->n_head * p->head_dim;
    d->nkv = p->n_head_kv * p->head_dim;
    d->n_rep = p->n_head / p->n_head_kv;
    d->token_types = token_types;
    int L = p->n_layers;
    d->block = malloc((size_t)d->D);
    for (int b = 0; b < 4; b++) d->block_coords[b] = malloc((size_t)d->D * sizeof(int32_t));
    d->u0 = calloc((size_t)d->D, sizeof *d->u0);
    d->rank_logit = malloc((size_t)d->E * sizeof *d->rank_logit);
    d->rank = malloc((size_t)L * d->E * sizeof *d->rank);
    d->qk_norm = malloc((size_t)d->hd * sizeof *d->qk_norm);
    d->long_pair = malloc((size_t)d->hd / 2);
    d->head_long = malloc((size_t)p->n_head);
    d->value_src = malloc((size_t)p->n_head_kv * sizeof *d->value_src);
    d->n_short = malloc((size_t)p->n_head_kv * sizeof *d->n_short);
    d->n_long = malloc((size_t)p->n_head_kv * sizeof *d->n_long);
    d->layer = calloc((size_t)L, sizeof *d->layer);
    int32_t *perm = malloc((size_t)(d->D > d->E ? d->D : d->E) * sizeof *perm);
    bool ok = d->block && d->block_coords[0] && d->block_coords[1] && d->block_coords[2] && d->block_coords[3] &&
              d->u0 && d->rank_logit && d->rank && d->qk_norm && d->long_pair && d->head_long && d->value_src &&
              d->n_short && d->n_long && d->layer && perm;
    for (int l = 0; ok && l < L; l++) {
        d->layer[l].fast_scale = malloc((size_t)d->E * sizeof(float));
        d->layer[l].slow_scale = malloc((size_t)d->E * sizeof(float));
        ok = d->layer[l].fast_scale && d->layer[l].slow_scale;
    }
    if (!ok) {
        free(perm);
        synth_design_free(d);
        moex_errorf("synth: out of memory");
        return NULL;
    }
    /* Blocks: a random quarter of the coordinates each for U, F, S; J the rest. */
    struct rng r = rng_at(p->seed, STREAM_BLOCKS, 0);
    shuffle(perm, d->D, &r);
    int quarter = d->D / 4;
    for (int i = 0; i < d->D; i++) {
        int b = i < quarter ? BLK_U : i < 2 * quarter ? BLK_F : i < 3 * quarter ? BLK_S : BLK_J;
        d->block[perm[i]] = (uint8_t)b;
    }
    for (int c = 0; c < d->D; c++) {
        int b = d->block[c];
        d->block_coords[b][d->n_blk[b]++] = c;
    }
    r = rng_at(p->seed, STREAM_U0, 0);
    float inv = 1.0f / sqrtf((float)d->n_blk[BLK_U]);
    for (int c = 0; c < d->D; c++) {
        uint64_t bit = rng_u64(&r) >> 63;
        if (d->block[c] == BLK_U) d->u0[c] = bit ? inv : -inv;
    }
    d->alpha = sqrtf((float)d->n_blk[BLK_U]);
    for (int l = 0; l < L; l++) {
        r = rng_at(p->seed, STREAM_RANK, (uint64_t)l);
        shuffle(perm, d->E, &r);
        /* perm[rank] = expert */
        for (int k = 0; k < d->E; k++) d->rank[(size_t)l * d->E + perm[k]] = k;
    }
    free(perm);
    if (calibrate_router(d)) { synth_design_free(d); return NULL; }
    design_window(d);
    design_energy(d);
    if (design_router(d)) { synth_design_free(d); return NULL; }
    return d;
}

void synth_design_free(struct synth_design *d) {
    if (!d) return;
    free(d->block);
    for (int b = 0; b < 4; b++) free(d->block_coords[b]);
    free(d->u0);
    free(d->rank_logit);
    free(d->rank);
    free(d->qk_norm);
    free(d->long_pair);
    free(d->head_long);
    free(d->value_src);
    free(d->n_short);
    free(d->n_long);
    if (d->layer)
        for (int l = 0; l < d->p.n_layers; l++) { free(d->layer[l].fast_scale); free(d->layer[l].slow_scale); }
    free(d->layer);
    free(d);
}

const float *synth_design_rank_logits(const struct synth_design *d) { return d->rank_logit; }

/* ---- tensors ---- */

static void qk_row(const struct synth_design *d, enum synth_kind k, int layer, int64_t row, float *out) {
    int half = d->hd / 2;
    int64_t head = row / d->hd, pair = row % d->hd % half;
    struct rng jr = rng_at(d->p.seed, STREAM_QK_JITTER + (uint64_t)k, (uint64_t)layer << 32 | (uint64_t)(head * half + pair));
    float m = 1.0f + QK_HEAD_JITTER * rng_gauss(&jr);
    if (k == SK_ATTN_Q && d->head_long[head] && !d->long_pair[pair]) m = 0;
    float lead = d->layer[layer].rho_attn / d->alpha * m, noise = QK_NOISE / sqrtf((float)d->D);
    struct rng r = rng_at(d->p.seed, tensor_stream(k, layer), (uint64_t)row);
    for (int c = 0; c < d->D; c++) out[c] = lead * d->u0[c] + noise * rng_gauss(&r);
}

/* An attention output row: on S, short heads' outputs minus long heads' for
 * every value channel; elsewhere a small random leak. */
static void out_row(const struct synth_design *d, int layer, int64_t row, float *out) {
    if (d->block[row] != BLK_S) {
        struct rng r = rng_at(d->p.seed, tensor_stream(SK_ATTN_OUTPUT, layer), (uint64_t)row);
        for (int i = 0; i < d->nq; i++) out[i] = LEAK * d->out_scale * rng_gauss(&r);
        return;
    }
    /* The draws (one per value channel) go to out[0..nkv) and are spread over
     * the heads from the last head down: head h reads channel src*hd + c with
     * src <= h, which no later write has touched yet. */
    out_draws(d, layer, row, out);
    for (int h = d->p.n_head - 1; h >= 0; h--) {
        int src = d->value_src[h / d->n_rep];
        float sign = d->head_long[h] ? -1.0f / (float)d->n_long[src] : 1.0f / (float)d->n_short[src];
        for (int c = 0; c < d->hd; c++) out[h * d->hd + c] = d->out_scale * sign * out[src * d->hd + c];
    }
}

/* A router row: the expert's static logit along u0, its fast part from F and
 * its slow part from S, scaled by design_router. */
static void router_row(const struct synth_design *d, int layer, int64_t e, float *out) {
    const struct layer_design *ld = &d->layer[layer];
    float lead = ROUTER_SCALE * d->rank_logit[d->rank[(size_t)layer * d->E + e]] * ld->static_gain;
    float fast = ld->fast_scale[e], slow = ld->slow_scale[e];
    struct rng r = rng_at(d->p.seed, tensor_stream(SK_FFN_GATE_INP, layer), (uint64_t)e);
    for (int c = 0; c < d->D; c++) {
        float g = rng_gauss(&r);
        switch (d->block[c]) {
        case BLK_U: out[c] = lead * d->u0[c]; break;
        case BLK_F: out[c] = fast * g; break;
        case BLK_S: out[c] = slow * g; break;
        default: out[c] = 0; break;
        }
    }
}

static void output_row(const struct synth_design *d, int64_t v, float *out) {
    float bias = d->token_types && d->token_types[v] == 5 ? UNUSED_LOGIT : 0;
    float lead = bias * d->rho_out / d->alpha;
    float sf = OUTPUT_STD * d->rho_out / sqrtf(3.0f * d->n_blk[BLK_F]);
    float ss = OUTPUT_STD * d->rho_out / sqrtf(3.0f * d->n_blk[BLK_S] * d->out_var_s);
    float sj = OUTPUT_STD * d->rho_out / sqrtf(3.0f * d->n_blk[BLK_J] * d->out_var_j);
    struct rng r = rng_at(d->p.seed, tensor_stream(SK_OUTPUT, 0), (uint64_t)v);
    for (int c = 0; c < d->D; c++) {
        float g = rng_gauss(&r);
        switch (d->block[c]) {
        case BLK_U: out[c] = lead * d->u0[c]; break;
        case BLK_F: out[c] = sf * g; break;
        case BLK_S: out[c] = ss * g; break;
        default: out[c] = sj * g; break;
        }
    }
}

static void fill(struct rng *r, float scale, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = scale * rng_gauss(r);
}

void synth_noise_row(const struct synth_design *d, uint64_t stream, int64_t row, float scale, float *out, int64_t n) {
    struct rng r = rng_at(d->p.seed, stream, (uint64_t)row);
    fill(&r, scale, out, n);
}

void synth_design_row(const struct synth_design *d, enum synth_kind k, int layer, int64_t row, float *out) {
    struct rng r = rng_at(d->p.seed, tensor_stream(k, layer), (uint64_t)row);
    const struct layer_design *ld = k >= SK_FIRST_LAYER_KIND ? &d->layer[layer] : NULL;
    int D = d->D;
    switch (k) {
    case SK_TOKEN_EMBD:
        for (int c = 0; c < D; c++) {
            float g = rng_gauss(&r);
            switch (d->block[c]) {
            case BLK_U: out[c] = d->alpha * d->u0[c]; break;
            case BLK_F: out[c] = g; break;
            case BLK_S: out[c] = LEAK * g; break;
            default: out[c] = sqrtf(EMBD_J_VAR) * g; break;
            }
        }
        return;
    case SK_OUTPUT: output_row(d, row, out); return;
    case SK_OUTPUT_NORM: case SK_ATTN_NORM: case SK_FFN_NORM:
        for (int c = 0; c < D; c++) out[c] = 1.0f + NORM_JITTER * rng_gauss(&r);
        return;
    case SK_ATTN_Q_NORM: case SK_ATTN_K_NORM:
        memcpy(out, d->qk_norm, (size_t)d->hd * sizeof *out);
        return;
    case SK_ATTN_Q: case SK_ATTN_K: qk_row(d, k, layer, row, out); return;
    case SK_ATTN_V: {
        /* Reads F; a small leak from S and J; nothing from U, whose constant
         * would pass through the window average undamped. */
        float in_f = ld->rho_attn / sqrtf((float)d->n_blk[BLK_F]), other = LEAK * ld->rho_attn / sqrtf((float)D);
        r = rng_at(d->p.seed, tensor_stream(k, layer), value_row_source(d, row));
        for (int c = 0; c < D; c++) {
            float g = rng_gauss(&r);
            out[c] = d->block[c] == BLK_F ? in_f * g : d->block[c] == BLK_U ? 0 : other * g;
        }
        return;
    }
    case SK_ATTN_OUTPUT: out_row(d, layer, row, out); return;
    case SK_FFN_GATE_INP: router_row(d, layer, row, out); return;
    case SK_FFN_GATE_EXPS: fill(&r, GATE_STD / sqrtf((float)D), out, D); return;
    case SK_FFN_UP_EXPS: fill(&r, UP_STD / sqrtf((float)D), out, D); return;
    case SK_FFN_DOWN_EXPS: {
        int c = (int)(row % D);
        fill(&r, d->block[c] == BLK_J ? d->down_scale : LEAK * d->down_scale, out, d->FF);
        return;
    }
    default: return;
    }
}
