/* moex_rknpu_program: the generator's programs for one matmul, decoded. */
#include "api/api_impl.h"

#include "core/error.h"
#include "dev/dev_rknpu.h"
#include "dev/rknpu_gen.h"
#include "dev/rknpu_regs.h"

#include <stdio.h>
#include <stdlib.h>

/* Where the programs pretend their operands lie (any 16-byte aligned VAs do). */
enum { REGCMD_VA = 0x00100000, FEATURE_VA = 0x01000000, WEIGHTS_VA = 0x10000000, OUTPUT_VA = 0x40000000 };

int moex_rknpu_program(int M, int K, int N, void (*write)(void *user, const char *text, size_t len), void *user) {
    API_CHECK(write, -1);
    if (M < 1 || M > 65536 || K < 32 || K % 32 || K > RKNPU_MAX_K || N < 32 || N % 32 || N > (1 << 20))
        return moex_errorf("%d,%d,%d: M 1..65536, K and N multiples of 32 (K <= %d, N <= %d)", M, K, N, RKNPU_MAX_K,
                           1 << 20);
    int programs = rknpu_program_count(M, K, N);
    struct rknpu_stream s = {.cap = (size_t)programs * RKNPU_PROGRAM_WORDS, .base = REGCMD_VA};
    s.words = malloc(s.cap * sizeof *s.words);
    if (!s.words) return moex_errorf("out of memory");
    struct rknpu_matmul mm = {M, K, N, FEATURE_VA, WEIGHTS_VA, OUTPUT_VA};
    if (rknpu_emit_matmul(&s, &mm) != 0) {
        free(s.words);
        return -1;
    }
    rknpu_stream_link(&s, true);
    char line[512];
    struct rknpu_cost c = {0};
    rknpu_cost_matmul(&c, M, K, N);
    int n = snprintf(line, sizeof line,
                     "# %d x %d x %d (M x K x N): %d programs of %d words, PC-chained; features at 0x%08x, weights "
                     "at 0x%08x, output partials at 0x%08x; %llu bytes read, %llu written\n",
                     M, K, N, programs, RKNPU_PROGRAM_WORDS, FEATURE_VA, WEIGHTS_VA, OUTPUT_VA,
                     (unsigned long long)(c.feature_bytes + c.weight_bytes), (unsigned long long)c.output_bytes);
    write(user, line, (size_t)n);
    for (int p = 0; p < programs; p++) {
        n = snprintf(line, sizeof line, "program %d of %d at 0x%08x\n", p + 1, programs,
                     REGCMD_VA + p * RKNPU_PROGRAM_WORDS * 8);
        write(user, line, (size_t)n);
        for (int i = 0; i < RKNPU_PROGRAM_WORDS; i++) {
            uint64_t w = s.words[(size_t)p * RKNPU_PROGRAM_WORDS + (size_t)i];
            char text[400];
            rknpu_decode_word(w, text, sizeof text);
            n = snprintf(line, sizeof line, "  %2d  %016llx  %s\n", i, (unsigned long long)w, text);
            write(user, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
        }
    }
    free(s.words);
    return 0;
}

int moex_check_rknpu_options(const char *spec) { return dev_rknpu_check_options(spec); }
