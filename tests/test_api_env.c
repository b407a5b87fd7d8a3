/* The library reads no environment: MOEX_ISA and MOEX_INTERLEAVE, set to
 * values that once changed its kernels and layouts (or made it complain),
 * change nothing; moex_set_isa and moex_model_params.no_interleave do. */
#include "moex_tools.h"

#include "harness.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

static char model_path[4096];
static int messages;

static void on_log(void *user, enum moex_log_level level, const char *message) {
    (void)user;
    (void)level;
    fprintf(stderr, "unexpected message: %s\n", message);
    messages++;
}

/* Loads the model, makes a context and returns the bytes of its interleaved
 * copies (-1 on error). first: no error was set before, none may be now. */
static int64_t interleaved_bytes(bool no_interleave, bool first) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 2;
    mp.pin_threads = false;
    mp.no_interleave = no_interleave;
    mp.log = on_log;
    moex_model *m = moex_model_load(&mp);
    CHECKF(m != NULL, "%s", moex_last_error());
    if (first) CHECKF(!moex_last_error()[0], "'%s'", moex_last_error());
    moex_context *c = m ? moex_context_new(m, NULL) : NULL;
    CHECK(!m || c);
    int64_t bytes = -1;
    if (c) {
        struct moex_memory mem;
        moex_context_memory(c, &mem);
        bytes = (int64_t)mem.interleaved;
        CHECK(mem.kv > 0 && mem.scratch > 0);
        /* the kernels cannot change under a loaded model */
        CHECK(moex_set_isa("scalar") == -1 && strstr(moex_last_error(), "loading"));
    }
    moex_context_free(c);
    moex_model_free(m);
    return bytes;
}

int main(void) {
    setenv("MOEX_ISA", "scalar", 1);
    setenv("MOEX_INTERLEAVE", "0", 1);
    enum isa best = ISA_SCALAR;
    for (int i = ISA_SCALAR + 1; i < ISA_COUNT; i++)
        if (isa_available((enum isa)i)) best = (enum isa)i;
    CHECKF(!strcmp(moex_isa(), isa_name(best)), "kernels %s, best %s", moex_isa(), isa_name(best));

    /* q4_k: matrices this CPU's kernels may interleave */
    if (test_synth_file("tiny", "q4_k", "api_env.gguf", model_path, sizeof model_path) != 0) return 1;
    setenv("MOEX_ISA", "bogus", 1);
    bool has_r16 = quant_traits(QT_Q4_K)->gemm_r16 != NULL;
    int64_t interleaved = interleaved_bytes(false, true);
    CHECKF(has_r16 ? interleaved > 0 : interleaved == 0, "%lld bytes interleaved", (long long)interleaved);
    CHECK(interleaved_bytes(true, false) == 0);
    CHECK(messages == 0);
    CHECK(!strcmp(moex_isa(), isa_name(best)));

    CHECK(moex_set_isa("avx3") == -1 && strstr(moex_last_error(), "avx3"));
    CHECK(moex_set_isa("scalar") == 0 && !strcmp(moex_isa(), "scalar"));
    CHECK(interleaved_bytes(false, false) == 0); /* no SIMD kernel, no copies */
    CHECK(moex_set_isa(NULL) == 0 && !strcmp(moex_isa(), isa_name(best)));
    CHECK(moex_set_isa("") == 0 && !strcmp(moex_isa(), isa_name(best)));
    if (!has_r16) printf("this CPU has no interleaved Q4_K kernel: only the no-copies case was checked\n");
    return test_finish();
}
