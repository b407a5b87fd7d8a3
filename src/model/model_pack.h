/* The model's side of pack files: what a file records of the model it was
 * made from, and the model's matrices in the CPU's interleaved layout
 * (model_interleave) written into it, so that later runs map them instead
 * of repacking at every start. */
#ifndef MOEX_MODEL_PACK_H
#define MOEX_MODEL_PACK_H

#include <stdbool.h>
#include <stdint.h>

struct atomic_file;
struct matrix;
struct model;
struct packfile_info;
struct packfile_writer;
struct threadpool;

/* The model's fields of a pack file's header (identity, MoE shape, expert
 * types); the others zero. -1 (moex_error) for a model without MoE layers. */
int model_pack_describe(const struct model *m, struct packfile_info *out);

/* Appends every matrix model_interleave gives the layout to w, as host
 * entries by ascending source offset; *bytes: theirs in all. */
int model_pack_interleaved(struct model *m, struct threadpool *pool, struct packfile_writer *w, uint64_t *bytes);

/* A pack file holding the interleaved layout only (no device experts);
 * takes file over (committed or discarded). -1 when this machine has no
 * interleaved kernel for any of the model's matrices, or writing fails. */
int model_pack_interleaved_file(struct model *m, struct threadpool *pool, struct atomic_file *file, uint64_t *bytes);

/* Internal to src/model: the matrices that get the layout (out may be NULL:
 * the count), a matrix's offset in the GGUF, and w repacked into dst
 * (w->rows x w->row_bytes) with w's mapped pages dropped afterwards. */
int model_interleave_targets(struct model *m, struct matrix **out);
uint64_t model_source_offset(const struct model *m, const struct matrix *w);
void model_interleave_into(struct threadpool *pool, const struct matrix *w, void *dst);

#endif
