#include "moe/moe_layers.h"

#include "core/error.h"

int moe_model_check(const struct moe_model_desc *d) {
    if (d->n_layers < 0 || (d->n_layers > 0 && !d->layers)) return moex_errorf("MoE layers: invalid description");
    for (int i = 0; i < d->n_layers; i++) {
        const struct moe_layer_desc *a = &d->layers[0], *b = &d->layers[i];
        if (b->n_expert <= 0 || b->n_used <= 0 || b->n_used > b->n_expert || b->n_ff <= 0 || b->n_embd <= 0)
            return moex_errorf("layer %d: invalid expert shape (%d experts, top-%d, ffn %d, dim %d)", b->layer,
                               b->n_expert, b->n_used, b->n_ff, b->n_embd);
        if (b->n_expert != a->n_expert || b->n_used != a->n_used || b->n_ff != a->n_ff || b->n_embd != a->n_embd)
            return moex_errorf("layer %d: experts of another shape than layer %d's (%d x %d top-%d vs %d x %d top-%d): "
                               "moex needs one expert shape per model", b->layer, a->layer, b->n_expert, b->n_ff,
                               b->n_used, a->n_expert, a->n_ff, a->n_used);
        if (b->gate.type != b->up.type)
            return moex_errorf("layer %d: ffn_gate_exps (%s) and ffn_up_exps (%s) must have the same type", b->layer,
                               quant_type_name(b->gate.type), quant_type_name(b->up.type));
    }
    return 0;
}

const char *dense_kind_name(enum dense_kind k) {
    static const char *names[DENSE_KINDS] = { "attn q", "attn k", "attn v", "attn o", "shared expert", "dense ffn",
                                              "lm head", "short conv", "delta net" };
    return (unsigned)k < DENSE_KINDS ? names[k] : "?";
}
