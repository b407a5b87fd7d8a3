#include "harness.h"

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

int test_finish(void) {
    printf("%d checks, %d failed\n", test_checks, test_failures);
    /* A test that checked nothing proved nothing: it fails. */
    if (test_checks == 0) fprintf(stderr, "FAIL: the test made no checks\n");
    return test_failures || test_checks == 0 ? 1 : 0;
}
