/* Helpers of the oracle logit tests: id lists and the measures the oracle
 * READMEs use (argmax agreement, mean KL of ours against the reference,
 * median and max over positions of the max |diff|). */
#ifndef MOEX_TEST_LOGIT_COMPARE_H
#define MOEX_TEST_LOGIT_COMPARE_H

#include "harness.h"
#include "text/sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Whitespace-separated ids from a file; their count (0 if unreadable). */
static inline int read_ids(const char *path, int32_t *ids, int max) {
    char *text = read_whole_file(path, NULL);
    int n = 0;
    for (char *p = text; p && *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        ids[n++] = (int32_t)v;
        p = end;
    }
    free(text);
    return n;
}

static inline int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

struct measures { double argmax_agree, mean_kl, median_maxdiff, max_maxdiff; };

/* ref and ours: (n, V) logits. */
static inline struct measures compare(const float *ref, const float *ours, int n, int V) {
    struct measures m = { 0, 0, 0, 0 };
    float *maxdiff = malloc(sizeof(float) * n);
    for (int t = 0; t < n; t++) {
        const float *r = ref + (size_t)t * V, *o = ours + (size_t)t * V;
        m.argmax_agree += argmax(r, V) == argmax(o, V);
        double rmax = r[0], omax = o[0];
        float md = 0;
        for (int i = 0; i < V; i++) {
            if (r[i] > rmax) rmax = r[i];
            if (o[i] > omax) omax = o[i];
            float d = fabsf(r[i] - o[i]);
            if (d > md || d != d) md = d != d ? INFINITY : d;
        }
        maxdiff[t] = md;
        if (md > m.max_maxdiff) m.max_maxdiff = md;
        double rs = 0, os = 0;
        for (int i = 0; i < V; i++) { rs += exp(r[i] - rmax); os += exp(o[i] - omax); }
        double kl = 0;
        for (int i = 0; i < V; i++) {
            double lp = r[i] - rmax - log(rs), lq = o[i] - omax - log(os);
            kl += exp(lp) * (lp - lq);
        }
        m.mean_kl += kl;
    }
    qsort(maxdiff, (size_t)n, sizeof(float), cmp_float);
    m.median_maxdiff = n % 2 ? maxdiff[n / 2] : 0.5 * (maxdiff[n / 2 - 1] + maxdiff[n / 2]);
    m.argmax_agree /= n;
    m.mean_kl /= n;
    free(maxdiff);
    return m;
}

#endif
