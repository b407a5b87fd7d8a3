/* The forward pass priced op by op on the board (board.h: struct board_net). */
#include "dev/board.h"

/* Layers of a kind in the file, and the count the prediction is for. */
struct kind_scale {
    double mixer[BOARD_MIXERS], moe, dense;
};

static double ratio(double want, int have) { return want >= 1 && have > 0 ? want / have : 1.0; }

static struct kind_scale scales(const struct sim_figures *f, const struct board_net *n) {
    int mixers[BOARD_MIXERS] = { 0 }, moe = 0;
    for (int l = 0; l < n->n_layers; l++) {
        mixers[n->mixer[l]]++;
        moe += n->moe[l];
    }
    return (struct kind_scale){ { ratio(f->attn_layers, mixers[BOARD_ATTENTION]),
                                  ratio(f->conv_layers, mixers[BOARD_SHORTCONV]),
                                  ratio(f->delta_layers, mixers[BOARD_DELTANET]) },
                                ratio(f->moe_layers, moe), ratio(f->dense_layers, n->n_layers - moe) };
}

static double matmul_ns(const struct board *b, const struct board_net *n, int rows, const struct board_matmul *mm) {
    double cpu = board_cpu_matmul_ns(b, rows, mm->K, mm->N, mm->type);
    if (!mm->resident || n->device_min_m < 1 || rows < n->device_min_m) return cpu;
    double npu = board_npu_matmul_ns(b, rows, mm->K, mm->N);
    return npu >= 0 && npu < cpu ? npu : cpu;
}

double board_net_ns(const struct board *b, const struct board_net *n, int n_tokens, int n_past, bool all_logits) {
    const struct sim_figures *f = board_figures(b);
    struct kind_scale s = scales(f, n);
    double ns = 0;
    for (int i = 0; i < n->n_mm; i++) {
        const struct board_matmul *mm = &n->mm[i];
        double scale = mm->ffn ? (n->moe[mm->layer] ? s.moe : s.dense) : s.mixer[n->mixer[mm->layer]];
        ns += scale * matmul_ns(b, n, n_tokens, mm);
    }
    for (int l = 0; l < n->n_layers; l++)
        if (n->mixer[l] == BOARD_ATTENTION)
            ns += s.mixer[BOARD_ATTENTION] * board_attention_ns(b, n_tokens, n_past, n->n_head, n->key_dim, n->value_dim);
    if (n->head.N > 0)
        ns += ratio(f->vocab, (int)n->head.N) * matmul_ns(b, n, all_logits ? n_tokens : 1, &n->head);
    return ns;
}
