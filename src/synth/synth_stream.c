/* What every synthetic-model writer shares: the general.* and trailing
 * keys, and the streaming loop that generates, quantizes and writes the
 * tensors slab by slab on a thread pool. */
#include "synth/synth_arch.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "synth/synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLAB_BYTES ((size_t)16 << 20)   /* output bytes generated per round trip to the writer */

static const char *arch_name(const struct synth_params *p) { return p->arch ? p->arch : "qwen3moe"; }

void synth_set_general(const struct synth_params *p, struct gguf_writer *w) {
    char desc[256];
    snprintf(desc, sizeof desc, "moex synth: random-weight %s; expert popularity zipf skew %g, locality %g, seed %llu",
             arch_name(p), p->skew, p->locality, (unsigned long long)p->seed);
    gguf_set_str(w, "general.architecture", arch_name(p));
    gguf_set_str(w, "general.name", p->name ? p->name : "moex-synth");
    gguf_set_str(w, "general.description", desc);
    gguf_set_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
}

void synth_set_trailer(const struct synth_params *p, const struct synth_vocab *v, struct gguf_writer *w) {
    synth_vocab_set_keys(v, w);
    gguf_set_u32(w, "general.quantization_version", 2);
    gguf_set_u32(w, "general.file_type", synth_file_type(p->type));
    gguf_set_f32(w, "moex.synth.skew", (float)p->skew);
    gguf_set_f32(w, "moex.synth.locality", (float)p->locality);
    gguf_set_u64(w, "moex.synth.seed", p->seed);
}

void synth_tensor_init(const struct synth_params *p, struct synth_tensor *t, const char *name, int kind, int layer,
                       int n_dims, const int64_t ne[3]) {
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->layer = layer;
    t->n_dims = n_dims;
    for (int d = 0; d < 3; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = synth_tensor_type(p, name, t->ne[0]);
    t->rows = t->ne[1] * t->ne[2];
    t->row_bytes = quant_row_size((enum qtype)t->type, t->ne[0]);
}

struct slab_job {
    synth_row_fn row;
    const void *design;
    const struct synth_tensor *t;
    from_float_fn from_float;
    int64_t row0;
    uint8_t *out;
    float *scratch;           /* (threads, max row length) */
    int64_t scratch_stride;
};

static void slab_rows(void *arg, int64_t begin, int64_t end, int thread_index) {
    struct slab_job *j = arg;
    float *row = j->scratch + thread_index * j->scratch_stride;
    for (int64_t r = begin; r < end; r++) {
        j->row(j->design, j->t, j->row0 + r, row);
        j->from_float(row, j->out + (size_t)r * j->t->row_bytes, j->t->ne[0]);
    }
}

static int write_tensors(const struct synth_params *p, synth_row_fn row, const void *design,
                         const struct synth_tensor *plan, int n, struct gguf_writer *w) {
    struct threadpool *pool = threadpool_new(p->n_threads, false);
    if (!pool) return -1;
    int threads = threadpool_size(pool);
    int64_t stride = 0;
    size_t max_row = 0;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (plan[i].ne[0] > stride) stride = plan[i].ne[0];
        if (plan[i].row_bytes > max_row) max_row = plan[i].row_bytes;
        total += plan[i].row_bytes * (uint64_t)plan[i].rows;
    }
    size_t slab_cap = max_row > SLAB_BYTES ? max_row : SLAB_BYTES;
    uint8_t *slab = malloc(slab_cap);
    float *scratch = malloc((size_t)threads * (size_t)stride * sizeof *scratch);
    int rc = slab && scratch ? 0 : moex_errorf("synth: out of memory");
    if (p->progress) p->progress(p->progress_user, "synth", 0, total);
    uint64_t done = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct synth_tensor *t = &plan[i];
        struct slab_job job = { row, design, t, quant_traits((enum qtype)t->type)->from_float, 0, slab, scratch, stride };
        int64_t per_slab = (int64_t)(slab_cap / t->row_bytes);
        int64_t grain = t->ne[0] >= 4096 ? 1 : 4096 / t->ne[0];
        for (job.row0 = 0; job.row0 < t->rows && rc == 0; job.row0 += per_slab) {
            int64_t rows = t->rows - job.row0 < per_slab ? t->rows - job.row0 : per_slab;
            threadpool_parallel_for(pool, rows, grain, slab_rows, &job);
            rc = gguf_writer_write_data(w, slab, (size_t)rows * t->row_bytes);
            done += (uint64_t)rows * t->row_bytes;
            if (p->progress && done < total) p->progress(p->progress_user, "synth", done, total);
        }
    }
    if (p->progress && total > 0) p->progress(p->progress_user, "synth", total, total); /* the end, also of a failure */
    free(slab);
    free(scratch);
    threadpool_free(pool);
    return rc;
}

int synth_write_file(const struct synth_params *p, struct gguf_writer *w, const struct synth_tensor *t, int n,
                     synth_row_fn row, const void *design, const char *path) {
    for (int i = 0; i < n; i++)
        if (gguf_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne)) return -1;
    if (gguf_writer_begin(w, path)) return -1;
    int rc = write_tensors(p, row, design, t, n, w);
    if (rc == 0) rc = gguf_writer_finish(w);
    return rc; /* on failure gguf_writer_free removes the temporary; a file at path stays */
}
