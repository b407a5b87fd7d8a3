/* Synthetic models for the public API: the preset and the overrides of
 * moex_synth_params resolved into src/synth's parameters. */
#include "api/api_impl.h"

#include "synth/synth.h"

#include <string.h>

void moex_synth_params_default(struct moex_synth_params *p) {
    API_CHECK_VOID(p);
    memset(p, 0, sizeof *p);
    p->skew = p->locality = -1;
    p->seed = -1;
}

/* The built-in vocabulary keeps its 256 byte tokens and 3 control tokens
 * (src/synth/synth_vocab.c); a vocab_from file's own limits are found on reading it. */
enum { BUILTIN_VOCAB_MIN = 259 };

static enum moex_synth_status resolve(const struct moex_synth_params *in, struct synth_params *p) {
    const char *preset = in->preset;
    if (in->arch && !preset && !(preset = synth_arch_default_preset(in->arch))) {
        char names[128];
        synth_arch_names(names, sizeof names);
        moex_errorf("architecture '%s' is not one of %s", in->arch, names);
        return MOEX_SYNTH_BAD_ARCH;
    }
    if (!preset) preset = "small";
    if (synth_preset(preset, p)) return MOEX_SYNTH_BAD_PRESET;
    if (in->arch && strcmp(in->arch, p->arch)) {
        moex_errorf("preset %s is a %s preset, not %s", preset, p->arch, in->arch);
        return MOEX_SYNTH_OTHER_ARCH;
    }
    const int overrides[][2] = {
        { in->n_layers, offsetof(struct synth_params, n_layers) },
        { in->n_embd, offsetof(struct synth_params, n_embd) },
        { in->n_expert, offsetof(struct synth_params, n_expert) },
        { in->n_expert_used, offsetof(struct synth_params, n_expert_used) },
        { in->n_ff_exp, offsetof(struct synth_params, n_ff_exp) },
        { in->n_head, offsetof(struct synth_params, n_head) },
        { in->n_head_kv, offsetof(struct synth_params, n_head_kv) },
        { in->head_dim, offsetof(struct synth_params, head_dim) },
        { in->n_vocab, offsetof(struct synth_params, n_vocab) },
        { in->n_ctx, offsetof(struct synth_params, n_ctx) },
    };
    for (size_t i = 0; i < sizeof overrides / sizeof *overrides; i++)
        if (overrides[i][0] > 0) *(int *)((char *)p + overrides[i][1]) = overrides[i][0];
    if (in->type && synth_parse_type(in->type, &p->type)) {
        moex_errorf("type '%s' is not one of f16, q8_0, q4_k, q6_k, q4_k_m", in->type);
        return MOEX_SYNTH_BAD_TYPE;
    }
    if (in->rope_base > 0) p->rope_base = (float)in->rope_base;
    if (in->skew >= 0) p->skew = in->skew;
    if (in->locality >= 0) p->locality = in->locality;
    if (in->seed >= 0) p->seed = (uint64_t)in->seed;
    p->vocab_from = in->vocab_from;
    p->name = in->name;
    p->n_threads = in->n_threads;
    p->progress = in->progress;
    p->progress_user = in->user;
    if (synth_check(p)) return MOEX_SYNTH_BAD_SHAPE;
    if (!p->vocab_from && p->n_vocab && p->n_vocab < BUILTIN_VOCAB_MIN) {
        moex_errorf("the built-in vocabulary needs at least %d tokens: 256 byte tokens and 3 control tokens",
                    BUILTIN_VOCAB_MIN);
        return MOEX_SYNTH_BAD_VOCAB;
    }
    return MOEX_SYNTH_OK;
}

enum moex_synth_status moex_synth_check(const struct moex_synth_params *in, struct moex_synth_shape *shape) {
    if (!in) return api_null(__func__, "p"), MOEX_SYNTH_BAD_SHAPE;
    struct synth_params p;
    enum moex_synth_status status = resolve(in, &p);
    if (status == MOEX_SYNTH_OK && shape)
        *shape = (struct moex_synth_shape){ p.arch, synth_type_name(p.type), p.n_layers, p.n_embd, p.n_expert,
                                            p.n_expert_used };
    return status;
}

int moex_synth_write(const struct moex_synth_params *in, const char *path) {
    if (!in) return api_null(__func__, "p");
    API_CHECK(path, -1);
    struct synth_params p;
    if (resolve(in, &p) != MOEX_SYNTH_OK) return -1;
    return synth_write(&p, path);
}

const char *moex_synth_presets(void) { return synth_presets_help(); }
