/* An architecture is one row of this type (arch_table.c) and one file that
 * implements it (qwen3moe.c): its hyper-parameters, its tensors, what each
 * layer keeps between batches, and its forward pass built from the shared
 * blocks (block_*.h). docs/architectures.md says what adding one takes. */
#ifndef MOEX_ARCH_H
#define MOEX_ARCH_H

#include <stdbool.h>
#include <stdint.h>

struct context;
struct layer_state;
struct model;

struct synth_arch;

struct arch {
    const char *name;            /* general.architecture */
    /* Its synthetic models (src/synth/, `moex synth --arch`), or NULL. */
    const struct synth_arch *synth;
    /* Reads and validates m->hp and the architecture's own hyper-parameters
     * from m->file (model_load.h's getters). */
    int (*load_hparams)(struct model *m);
    /* Layer l's kind and state sizes (after load_hparams). */
    void (*layer_state)(const struct model *m, int layer, struct layer_state *out);
    /* Binds every tensor (names and shapes checked): m->weights, the
     * embedding, output norm and head, and m->moe_layers / m->moe. */
    int (*bind)(struct model *m);
    /* The forward pass's own buffers for c->n_batch tokens, or NULL with
     * moex_error(); freed with workspace_free. */
    void *(*workspace_new)(const struct context *c);
    void (*workspace_free)(void *ws);
    /* n tokens (at most c->n_batch) in c->runs: each run's tokens at its
     * sequence's positions run.pos0.. (one run: c->n_past.., state
     * c->layers). Writes their state and logits, (n, n_vocab) when
     * all_logits else the last token's (n_vocab) (into c->last_logits when
     * logits is NULL), or with several runs the last token of each run that
     * wants them (block_io.h's output_head). The context advances n_past.
     * -1 with moex_error() on failure. */
    int (*forward)(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits);
};

/* The row for general.architecture `name`, or NULL. */
const struct arch *arch_find(const char *name);
/* The table, in order: n_arch rows. */
int arch_count(void);
const struct arch *arch_at(int i);
/* Writes "qwen3moe, ..." (for messages) into out. */
void arch_names(char *out, int size);

#endif
