/* The forward pass priced op by op on the board (board_net.h). */
#include "model/board_net.h"

#include "core/error.h"
#include "dev/board.h"
#include "gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_matmul(struct board_net *n, struct board_matmul mm, int *cap) {
    if (n->n_mm == *cap) {
        int c = *cap ? 2 * *cap : 64;
        struct board_matmul *v = realloc(n->mm, sizeof *v * (size_t)c);
        if (!v) return moex_errorf("out of memory");
        n->mm = v;
        *cap = c;
    }
    n->mm[n->n_mm++] = mm;
    return 0;
}

int board_net_from_model(const struct model *m, struct board_net *out) {
    memset(out, 0, sizeof *out);
    int L = m->hp.n_layers, cap = 0;
    out->n_layers = L;
    out->mixer = calloc((size_t)(L ? L : 1), sizeof *out->mixer);
    out->moe = calloc((size_t)(L ? L : 1), sizeof *out->moe);
    if (!out->mixer || !out->moe) { board_net_free(out); return moex_errorf("out of memory"); }
    for (int l = 0; l < L; l++) out->mixer[l] = m->state[l].kind;
    out->n_head = m->hp.n_head;
    out->key_dim = m->hp.head_dim;
    out->value_dim = m->hp.value_dim;
    const struct gguf_tensor *head = gguf_find_tensor(m->file, "output.weight");
    if (!head) head = gguf_find_tensor(m->file, "token_embd.weight"); /* tied */
    if (head) out->head = (struct board_matmul){ -1, false, head->ne[0], head->ne[1], (enum qtype)head->type };
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const struct gguf_tensor *t = &m->file->tensors[i];
        int layer, at = 0;
        if (sscanf(t->name, "blk.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0 || layer >= L) continue;
        const char *what = t->name + at;
        if (strstr(what, "_exps")) { out->moe[layer] = true; continue; }
        if (t->n_dims != 2 || t->ne[1] < 2) continue; /* norms, biases, gates of one value */
        struct board_matmul mm = { layer, strstr(what, "ffn") != NULL, t->ne[0], t->ne[1], (enum qtype)t->type };
        if (add_matmul(out, mm, &cap) != 0) { board_net_free(out); return -1; }
    }
    return 0;
}

void board_net_free(struct board_net *n) {
    free(n->mixer);
    free(n->moe);
    free(n->mm);
    memset(n, 0, sizeof *n);
}

/* Layers of a kind in the file, and the count the prediction is for. */
struct kind_scale {
    double mixer[LAYER_KINDS], moe, dense;
};

static double ratio(double want, int have) { return want >= 1 && have > 0 ? want / have : 1.0; }

static struct kind_scale scales(const struct sim_figures *f, const struct board_net *n) {
    int mixers[LAYER_KINDS] = { 0 }, moe = 0;
    for (int l = 0; l < n->n_layers; l++) {
        mixers[n->mixer[l]]++;
        moe += n->moe[l];
    }
    return (struct kind_scale){ { ratio(f->attn_layers, mixers[LAYER_ATTENTION]),
                                  ratio(f->conv_layers, mixers[LAYER_SHORTCONV]),
                                  ratio(f->delta_layers, mixers[LAYER_DELTANET]) },
                                ratio(f->moe_layers, moe), ratio(f->dense_layers, n->n_layers - moe) };
}

static double matmul_ns(const struct board *b, int rows, const struct board_matmul *mm) {
    const struct sim_figures *f = board_figures(b);
    double cpu = board_cpu_matmul_ns(b, rows, mm->K, mm->N, mm->type);
    if (!f->dense_npu || rows < f->min_m) return cpu;
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
        ns += scale * matmul_ns(b, n_tokens, mm);
    }
    for (int l = 0; l < n->n_layers; l++)
        if (n->mixer[l] == LAYER_ATTENTION)
            ns += s.mixer[LAYER_ATTENTION] * board_attention_ns(b, n_tokens, n_past, n->n_head, n->key_dim, n->value_dim);
    if (n->head.N > 0)
        ns += ratio(f->vocab, (int)n->head.N) * matmul_ns(b, all_logits ? n_tokens : 1, &n->head);
    return ns;
}
