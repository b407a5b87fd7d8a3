/* A model's forward pass described for the board model (dev/board.h). */
#include "model/board_net.h"

#include "dev/board.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "arch/tensor_names.h"

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
    static const enum board_mixer mixers[LAYER_KINDS] = { BOARD_ATTENTION, BOARD_SHORTCONV, BOARD_DELTANET };
    for (int l = 0; l < L; l++) out->mixer[l] = mixers[m->state[l].kind];
    out->n_head = m->hp.n_head;
    out->key_dim = m->hp.head_dim;
    out->value_dim = m->hp.value_dim;
    const struct gguf_tensor *head = gguf_find_tensor(m->file, TN_OUTPUT);
    if (!head) head = gguf_find_tensor(m->file, TN_TOKEN_EMBD); /* tied */
    if (head)
        out->head = (struct board_matmul){ -1, false, head->ne[0], head->ne[1], (enum qtype)head->type, head->data, false };
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const struct gguf_tensor *t = &m->file->tensors[i];
        int layer, at = 0;
        if (sscanf(t->name, "blk.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0 || layer >= L) continue;
        const char *what = t->name + at;
        if (strstr(what, "_exps")) { out->moe[layer] = true; continue; }
        if (t->n_dims != 2 || t->ne[1] < 2) continue; /* norms, biases, gates of one value */
        struct board_matmul mm = { layer, strstr(what, "ffn") != NULL, t->ne[0], t->ne[1], (enum qtype)t->type, t->data,
                                   false };
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
