/* Writing a pack file for a model (the library side of `moex pack`): the
 * experts a run with the same options would pin, or every expert, packed
 * one at a time through the device's own pack path into a three-slot pool
 * and streamed to the file, so memory stays at one expert whatever the
 * model and the bytes are those a live pack makes. */
#ifndef MOEX_PACK_EXPERTS_H
#define MOEX_PACK_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

struct atomic_file;
struct moe_model_desc;
struct threadpool;
struct moe_exec_options;

struct moe_pack_result {
    char device[16];
    int experts;              /* written */
    int pinned;               /* of them, pinned by the plan (they come first) */
    uint64_t source_bytes;    /* GGUF bytes read by packing */
    uint64_t file_bytes;
    int64_t pack_ns;          /* in the device's pack path (modelled on sim) */
    int64_t total_ns;         /* packing and writing */
    bool pack_modelled;
};

/* Called after each expert. */
typedef void (*moe_pack_progress_fn)(void *user, int done, int total);
/* Called after the last expert, before the file is finished: more entries
 * (the CPU's interleaved layout, model_pack_interleaved). */
struct packfile_writer;
typedef int (*moe_pack_more_fn)(void *user, struct packfile_writer *w);

/* Packs for o->device (its budget, statistics, sim figures) into file
 * (src/core/atomic_file.h; taken over, committed or discarded), using
 * pool's threads. all: every expert, the plan's pinned ones first. -1 with
 * moex_error() when the device cannot be used, the plan pins no expert (and
 * not all), or writing fails (a file already at the path stays as it was). */
int moe_pack_experts(const struct moe_model_desc *d, const struct moe_exec_options *o, struct threadpool *pool, bool all,
                     struct atomic_file *file, moe_pack_progress_fn progress, void *user, moe_pack_more_fn more,
                     void *more_user, struct moe_pack_result *out);

#endif
