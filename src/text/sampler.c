#include "text/sampler.h"

#include "core/error.h"
#include "text/grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct candidate {
    int32_t id;
    float logit, p;
};

struct sampler {
    struct moex_sampler_params p;
    int n_vocab;
    uint64_t rng;
    int32_t *recent;      /* ring of the last repeat_last_n tokens */
    int n_recent, next_recent;
    struct candidate *cand;
    uint8_t *penalized;   /* (n_vocab) set while the penalty visits the ring: once per distinct token */
    /* The OpenAI API's penalties and logit_bias (sampler_set_penalties,
     * sampler_set_logit_bias): counts of the tokens this sampler drew. */
    float presence, frequency;
    int *drawn;                        /* (n_vocab) when a penalty is on */
    int32_t *drawn_ids;                /* (n_vocab) the distinct ids drawn, n_drawn_ids of them: the
                                          penalty visits those, not the vocabulary */
    int n_drawn_ids;
    int32_t *bias_id;                  /* (n_bias) */
    float *bias;
    int n_bias;
    struct grammar_sampler *grammar;   /* or NULL; drawn_since_accept: a draw awaits its accept */
    bool drawn_since_accept;
};

void sampler_defaults(struct moex_sampler_params *p) {
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
}

static int check_params(const struct moex_sampler_params *p, int n_vocab) {
    if (n_vocab <= 0) return moex_errorf("the sampler needs a vocabulary, not %d tokens", n_vocab);
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p))
        return moex_errorf("temperature, top_p and min_p must be numbers (not NaN)");
    if (!(p->repeat_penalty > 0) || isinf(p->repeat_penalty))
        return moex_errorf("repeat_penalty %g is not a positive number (1: off)", (double)p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > SAMPLER_MAX_LAST_N)
        return moex_errorf("repeat_last_n %d is not in 0..%d", p->repeat_last_n, SAMPLER_MAX_LAST_N);
    return 0;
}

struct sampler *sampler_new(const struct moex_sampler_params *p, int n_vocab) {
    if (check_params(p, n_vocab)) return NULL;
    struct sampler *s = calloc(1, sizeof *s);
    if (!s) return moex_errorf("out of memory"), NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed * 0x9E3779B97F4A7C15ull + 1;
    s->recent = malloc(sizeof *s->recent * (size_t)(s->p.repeat_last_n + 1));
    s->cand = malloc(sizeof *s->cand * (size_t)n_vocab);
    s->penalized = calloc((size_t)n_vocab, 1);
    if (!s->recent || !s->cand || !s->penalized) {
        sampler_free(s);
        return moex_errorf("out of memory for a sampler of %d tokens", n_vocab), NULL;
    }
    return s;
}

void sampler_free(struct sampler *s) {
    if (!s) return;
    free(s->drawn);
    free(s->drawn_ids);
    free(s->bias_id);
    free(s->bias);
    free(s->recent);
    free(s->cand);
    free(s->penalized);
    grammar_sampler_free(s->grammar);
    free(s);
}

void sampler_set_grammar(struct sampler *s, struct grammar_sampler *gs) {
    grammar_sampler_free(s->grammar);
    s->grammar = gs;
    s->drawn_since_accept = false;
}

int sampler_accept(struct sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab)
        return moex_errorf("token id %d is out of range (vocabulary of %d): not recorded", (int)token, s->n_vocab);
    if (s->grammar && s->drawn_since_accept) grammar_sampler_accept(s->grammar, token);
    s->drawn_since_accept = false;
    if (s->p.repeat_last_n == 0) return 0;
    s->recent[s->next_recent] = token;
    s->next_recent = (s->next_recent + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
    return 0;
}

int32_t argmax(const float *v, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static double next_uniform(struct sampler *s) {
    /* xorshift64*: plenty for sampling, and reproducible from the seed. */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static int by_logit_desc(const void *a, const void *b) {
    const struct candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

int sampler_set_penalties(struct sampler *s, float presence, float frequency) {
    if (!(presence >= -2 && presence <= 2 && frequency >= -2 && frequency <= 2)) return -1;
    if ((presence != 0 || frequency != 0) && !s->drawn) {
        s->drawn = calloc((size_t)s->n_vocab, sizeof *s->drawn);
        s->drawn_ids = malloc(sizeof *s->drawn_ids * (size_t)s->n_vocab);
        if (!s->drawn || !s->drawn_ids) {
            free(s->drawn), free(s->drawn_ids);
            s->drawn = NULL, s->drawn_ids = NULL;
            return -1;
        }
    }
    s->presence = presence;
    s->frequency = frequency;
    return 0;
}

int sampler_set_logit_bias(struct sampler *s, const int32_t *ids, const float *bias, int n) {
    if (n < 0) return -1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab || !isfinite(bias[i])) return -1;
    int32_t *g_id = malloc(sizeof *g_id * (size_t)(n ? n : 1));
    float *g = malloc(sizeof *g * (size_t)(n ? n : 1));
    if (!g_id || !g) { free(g_id); free(g); return -1; }
    if (n) { memcpy(g_id, ids, sizeof *ids * (size_t)n); memcpy(g, bias, sizeof *bias * (size_t)n); }
    free(s->bias_id);
    free(s->bias);
    s->bias_id = g_id;
    s->bias = g;
    s->n_bias = n;
    return 0;
}

static int32_t draw(struct sampler *s, float *logits);

int32_t sampler_sample(struct sampler *s, float *logits) {
    if (s->grammar) s->drawn_since_accept = grammar_sampler_apply(s->grammar, logits, s->n_vocab) == 0;
    for (int i = 0; i < s->n_bias; i++) logits[s->bias_id[i]] += s->bias[i];
    for (int k = 0; s->drawn && k < s->n_drawn_ids; k++) {
        int32_t i = s->drawn_ids[k];
        logits[i] -= s->presence + s->frequency * (float)s->drawn[i];
    }
    int32_t id = draw(s, logits);
    if (s->drawn && id >= 0 && id < s->n_vocab && s->drawn[id]++ == 0) s->drawn_ids[s->n_drawn_ids++] = id;
    return id;
}

static int32_t draw(struct sampler *s, float *logits) {
    if (s->p.repeat_penalty != 1.0f) {
        /* Once per distinct token, as the usual implementations do. */
        for (int i = 0; i < s->n_recent; i++) {
            int32_t id = s->recent[i];
            if (s->penalized[id]) continue;
            s->penalized[id] = 1;
            logits[id] = logits[id] > 0 ? logits[id] / s->p.repeat_penalty : logits[id] * s->p.repeat_penalty;
        }
        for (int i = 0; i < s->n_recent; i++) s->penalized[s->recent[i]] = 0;
    }
    if (s->p.temperature <= 0) return argmax(logits, s->n_vocab);

    int n = s->n_vocab;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        /* Keep the k best in a min-heap (O(n log k)), then sort only those. */
        int k = s->p.top_k, size = 0;
        struct candidate *heap = s->cand;
        for (int i = 0; i < s->n_vocab; i++) {
            struct candidate c = { i, logits[i] / s->p.temperature, 0 };
            if (size < k) {
                int j = size++;
                while (j > 0 && by_logit_desc(&c, &heap[(j - 1) / 2]) > 0) { heap[j] = heap[(j - 1) / 2]; j = (j - 1) / 2; }
                heap[j] = c;
            } else if (by_logit_desc(&c, &heap[0]) < 0) {
                int j = 0;
                for (;;) {
                    int l = 2 * j + 1, r = l + 1, m = j;
                    const struct candidate *mc = &c;
                    if (l < k && by_logit_desc(&heap[l], mc) > 0) { m = l; mc = &heap[l]; }
                    if (r < k && by_logit_desc(&heap[r], mc) > 0) { m = r; }
                    if (m == j) break;
                    heap[j] = heap[m];
                    j = m;
                }
                heap[j] = c;
            }
        }
        n = k;
    } else {
        for (int i = 0; i < n; i++) s->cand[i] = (struct candidate){ i, logits[i] / s->p.temperature, 0 };
    }
    qsort(s->cand, (size_t)n, sizeof *s->cand, by_logit_desc);
    double sum = 0;
    float max = s->cand[0].logit;
    for (int i = 0; i < n; i++) {
        s->cand[i].p = expf(s->cand[i].logit - max);
        sum += s->cand[i].p;
    }
    for (int i = 0; i < n; i++) s->cand[i].p = (float)(s->cand[i].p / sum);
    if (s->p.min_p > 0) {
        float floor = s->cand[0].p * s->p.min_p;
        int keep = 1;
        while (keep < n && s->cand[keep].p >= floor) keep++;
        n = keep;
    }
    if (s->p.top_p < 1) {
        double cum = 0;
        int keep = 0;
        while (keep < n) {
            cum += s->cand[keep++].p;
            if (cum >= s->p.top_p) break;
        }
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += s->cand[i].p;
    double r = next_uniform(s) * total;
    for (int i = 0; i < n; i++) {
        r -= s->cand[i].p;
        if (r <= 0) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
