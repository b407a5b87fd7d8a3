/* One synthetic-model writer per architecture (synth_qwen3moe.c), a row of
 * synth.c's table, chosen by synth_params.arch (moex synth --arch), and the
 * pieces every writer shares: the general.* and trailing keys, tensor types
 * by llama.cpp's rules, and the streaming of rows to the file on a pool. */
#ifndef MOEX_SYNTH_ARCH_H
#define MOEX_SYNTH_ARCH_H

#include "synth/synth.h"

#include <stddef.h>
#include <stdint.h>

struct gguf_writer;
struct synth_vocab;

struct synth_preset_doc {
    const char *name, *summary;
};

struct synth_arch {
    const char *name;            /* general.architecture */
    const char *default_preset;  /* for --arch without --preset */
    /* Fills p with one of this architecture's presets:
     * 0, 1 when it has no preset of that name. NULL: none. */
    int (*preset)(const char *name, struct synth_params *p);
    /* Its presets for people, n_presets of them: name and one line. */
    const struct synth_preset_doc *presets;
    int n_presets;
    /* Checks beyond synth_check's common limits; NULL: none. */
    int (*check)(const struct synth_params *p);
    /* Writes the model (p checked, vocabulary built) to path. */
    int (*write)(const struct synth_params *p, const struct synth_vocab *v, const char *path);
};

/* general.architecture, name, description (what, skew, locality, seed), alignment. */
void synth_set_general(const struct synth_params *p, struct gguf_writer *w);
/* The keys after the architecture's: tokenizer, quantization version, file
 * type, moex.synth.*. */
void synth_set_trailer(const struct synth_params *p, const struct synth_vocab *v, struct gguf_writer *w);

/* A tensor to write; kind and layer are the writer's own tags. */
struct synth_tensor {
    char name[64];
    int kind, layer;
    uint32_t type;               /* synth_tensor_type */
    int n_dims;
    int64_t ne[3];
    int64_t rows;                /* ne[1] * ne[2] */
    size_t row_bytes;
};
/* Fills t: name, tags, shape and its type for p. */
void synth_tensor_init(const struct synth_params *p, struct synth_tensor *t, const char *name, int kind, int layer,
                       int n_dims, const int64_t ne[3]);

/* Row `row` of tensor t, ne[0] floats, from the writer's design; called
 * from several threads at once. */
typedef void (*synth_row_fn)(const void *design, const struct synth_tensor *t, int64_t row, float *out);

/* Declares the tensors on w (its keys set), writes the file and streams
 * every tensor's rows, quantized to its type, in order. The bytes do not
 * depend on the thread count. 0, or -1 with moex_error(); a partly written
 * file is removed. */
int synth_write_file(const struct synth_params *p, struct gguf_writer *w, const struct synth_tensor *t, int n,
                     synth_row_fn row, const void *design, const char *path);

#endif
