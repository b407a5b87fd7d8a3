/* Generates a continuation of a prompt with libmoex's public API only.
 *   cc generate.c $(pkg-config --cflags --libs moex) -o generate
 *   ./generate MODEL.gguf "Once upon a time" 32 */
#include <moex.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_log(void *user, enum moex_log_level level, const char *message) {
    (void)user;
    fprintf(stderr, "%s: %s\n", level == MOEX_LOG_WARN ? "warning" : "note", message);
}

static int on_token(void *user, int32_t id, const char *text, size_t len) {
    (void)user;
    (void)id;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N_TOKENS]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    int n_tokens = argc > 3 ? atoi(argv[3]) : 32;

    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = argv[1];
    mp.log = on_log;
    moex_model *model = moex_model_load(&mp);
    if (!model) { fprintf(stderr, "error: %s\n", moex_last_error()); return 1; }

    moex_context *ctx = moex_context_new(model, NULL);
    struct moex_sampler_params sp;
    moex_sampler_params_default(&sp);
    sp.seed = 42;
    moex_sampler *smp = moex_sampler_new(model, &sp);
    int n_prompt = 0;
    int32_t *ids = ctx && smp ? moex_tokenize_alloc(model, prompt, strlen(prompt), true, true, &n_prompt) : NULL;
    int rc = 1;
    if (ids) {
        fputs(prompt, stdout);
        struct moex_generate_params gp = { .max_tokens = n_tokens, .on_token = on_token };
        struct moex_generate_result r;
        if (moex_generate(ctx, smp, ids, n_prompt, &gp, &r) == 0) {
            printf("\n");
            fprintf(stderr, "%d prompt tokens, %d generated in %.2f s (moex %s)\n", r.n_prompt, r.n_generated,
                    r.prompt_s + r.generate_s, moex_version());
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "error: %s\n", moex_last_error());
    free(ids);
    moex_sampler_free(smp);
    moex_context_free(ctx);
    moex_model_free(model);
    return rc;
}
