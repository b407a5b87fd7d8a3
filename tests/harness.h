/* Minimal test harness: CHECK records a failure and goes on; the test's
 * main returns test_finish(), which prints a summary line. */
#ifndef MOEX_TEST_HARNESS_H
#define MOEX_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int test_failures;
extern int test_checks;

#define CHECK(cond) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Path of a file in the oracle directory (../shared/oracle by default, or
 * $MOEX_ORACLE). If the directory is missing the test exits with 77, which
 * ctest reports as "Skipped" (visible in the summary, never silent). */
const char *oracle_path(const char *relative);
/* A scratch directory for this test (created). */
const char *test_tmpdir(void);
/* Reads a whole file; NULL if it cannot. */
void *read_whole_file(const char *path, size_t *size);
/* 0 when every check passed; 1 when one failed or none was made. */
int test_finish(void);

/* Deterministic test data: the next value of one xorshift64 stream per
 * process, which starts at 0x9e3779b97f4a7c15 (test_seed sets it; not 0). */
void test_seed(uint64_t seed);
uint64_t test_rand(void);

/* A synthetic model of a preset (type: "q4_k" and the like; NULL: the
 * preset's) written on 2 threads to test_tmpdir()/NAME, its path in
 * path[size]. 0, or -1 with the reason printed (a test's set-up failed). */
int test_synth_file(const char *preset, const char *type, const char *name, char *path, size_t size);
/* A synthetic model of a preset (f16), written under test_tmpdir() as
 * TAG-PRESET.gguf and loaded on 2 unpinned threads; NULL (checked) on failure. */
struct moex_model;
struct moex_model *test_synth_model(const char *preset, const char *tag);
/* The same stream as floats: uniform in [0, 1), uniform in [-1, 1), and a
 * standard normal (Box-Muller). */
float test_uniform(void);
float test_symmetric(void);
float test_gauss(void);

/* Space- or newline-separated integers from a file (oracle id lists); the
 * count read, at most max (0 if the file cannot be read). */
int read_ids_file(const char *path, int32_t *ids, int max);

/* Logits of n positions (n, V) against reference ones: the share of
 * positions whose argmax agrees, the mean KL(ref || ours), the median and
 * the largest over positions of max|diff|. */
struct logit_measures { double argmax_agree, mean_kl, median_maxdiff, max_maxdiff; };
struct logit_measures compare_logits(const float *ref, const float *ours, int n, int V);

/* The index of the largest of v[0..n) (the first of equals). */
int32_t test_argmax(const float *v, int n);
/* max |a - b| over n values; infinite where a difference is NaN. */
double max_abs_diff(const float *a, const float *b, size_t n);
/* max |got - want| / max |want| over n values, the same way; want in
 * floats or in doubles (a reference computed in double). */
double rel_diff(const float *got, const float *want, size_t n);
double rel_diff_f64(const float *got, const double *want, size_t n);

#endif
