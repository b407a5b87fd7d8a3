#include "harness.h"

#include "moex_tools.h"
#include "text/sampler.h"

#include <stdio.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int test_failures;
int test_checks;

const char *oracle_path(const char *relative) {
    static char buf[4][4096];
    static int next;
    const char *dir = getenv("MOEX_ORACLE");
    if (!dir || !*dir) dir = "../shared/oracle";
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "SKIP: oracle directory %s not found (set MOEX_ORACLE)\n", dir);
        exit(77);
    }
    char *out = buf[next++ & 3];
    snprintf(out, sizeof buf[0], "%s/%s", dir, relative);
    return out;
}

const char *test_tmpdir(void) {
    static char dir[4096];
    if (dir[0]) return dir;
    const char *base = getenv("MOEX_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(dir, sizeof dir, "%s/t%ld", base, (long)getpid());
    mkdir(dir, 0755);
    return dir;
}

void *read_whole_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n + 1);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) { free(data); data = NULL; }
    fclose(f);
    if (data) { data[n] = 0; if (size) *size = (size_t)n; }
    return data;
}

static uint64_t rand_state = 0x9e3779b97f4a7c15ull;
void test_seed(uint64_t seed) { rand_state = seed ? seed : 0x9e3779b97f4a7c15ull; }
uint64_t test_rand(void) {
    rand_state ^= rand_state << 13;
    rand_state ^= rand_state >> 7;
    rand_state ^= rand_state << 17;
    return rand_state;
}

float test_uniform(void) { return (float)((test_rand() >> 40) * 0x1p-24); }

float test_symmetric(void) { return 2.0f * test_uniform() - 1.0f; }

float test_gauss(void) {
    float u1 = test_uniform(), u2 = test_uniform();
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

int test_finish(void) {
    printf("%d checks, %d failed\n", test_checks, test_failures);
    /* A test that checked nothing proved nothing: it fails. */
    if (test_checks == 0) fprintf(stderr, "FAIL: the test made no checks\n");
    return test_failures || test_checks == 0 ? 1 : 0;
}

int read_ids_file(const char *path, int32_t *ids, int max) {
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

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

struct logit_measures compare_logits(const float *ref, const float *ours, int n, int V) {
    struct logit_measures m = { 0, 0, 0, 0 };
    float *maxdiff = malloc(sizeof(float) * (size_t)n);
    if (!maxdiff || n <= 0) { free(maxdiff); m.max_maxdiff = INFINITY; return m; }
    for (int t = 0; t < n; t++) {
        const float *r = ref + (size_t)t * V, *o = ours + (size_t)t * V;
        m.argmax_agree += argmax(r, V) == argmax(o, V);
        double rmax = r[0], omax = o[0];
        float md = 0;
        for (int i = 0; i < V; i++) {
            if (r[i] > rmax) rmax = r[i];
            if (o[i] > omax) omax = o[i];
            float d = fabsf(r[i] - o[i]);
            if (!(d <= md)) md = d;   /* a NaN sticks */
        }
        maxdiff[t] = md;
        if (!(md <= m.max_maxdiff)) m.max_maxdiff = md;
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

/* Either want (floats) or want64 (doubles). */
static void diff_scale(const float *got, const float *want, const double *want64, size_t n, double *diff,
                       double *scale) {
    *diff = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        double w = want ? (double)want[i] : want64[i], e = fabs((double)got[i] - w);
        if (!(e <= *diff)) *diff = isnan(e) ? INFINITY : e;
        if (fabs(w) > *scale) *scale = fabs(w);
    }
}

double max_abs_diff(const float *a, const float *b, size_t n) {
    double diff, scale;
    diff_scale(a, b, NULL, n, &diff, &scale);
    return diff;
}

double rel_diff(const float *got, const float *want, size_t n) {
    double diff, scale;
    diff_scale(got, want, NULL, n, &diff, &scale);
    return diff / scale;
}

double rel_diff_f64(const float *got, const double *want, size_t n) {
    double diff, scale;
    diff_scale(got, NULL, want, n, &diff, &scale);
    return diff / scale;
}

int32_t test_argmax(const float *v, int n) { return argmax(v, n); }

int test_synth_file(const char *preset, const char *type, const char *name, char *path, size_t size) {
    struct moex_synth_params p;
    moex_synth_params_default(&p);
    p.preset = preset;
    if (type) p.type = type;
    p.n_threads = 2;
    int n = snprintf(path, size, "%s/%s", test_tmpdir(), name);
    if (n <= 0 || (size_t)n >= size) return fprintf(stderr, "synth: a path of %d bytes\n", n), -1;
    if (moex_synth_write(&p, path) != 0) return fprintf(stderr, "synth: %s\n", moex_last_error()), -1;
    return 0;
}

struct moex_model *test_synth_model(const char *preset, const char *tag) {
    char path[4096], name[256];
    snprintf(name, sizeof name, "%s-%s.gguf", tag, preset);
    CHECK(test_synth_file(preset, "f16", name, path, sizeof path) == 0);
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = path;
    mp.n_threads = 2;
    mp.pin_threads = false;
    return moex_model_load(&mp);
}
