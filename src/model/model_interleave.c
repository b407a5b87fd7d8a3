/* The CPU's own layout of the weights: Q4_K and Q6_K matrices repacked once
 * into rows interleaved by 16 (quant_r16_pack) where the selected kernels
 * have an r16 one: AVX-512 VNNI, AVX2 (AVX-VNNI where present), NEON dotprod.
 * On x86 those beat the plain rows at decode and prefill alike
 * (bench/r16.md); NEON's are checked under emulation only, not timed.
 * The copy replaces the mapped bytes instead of sitting beside them: the
 * file's pages are dropped from the process (they stay in the page cache and
 * fault back in only where something reads them: a device packing experts
 * from the file's layout), so resident memory does not grow. */
#include "model/model.h"

#include "core/error.h"
#include "core/threadpool.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct model_copies {
    int n, cap;
    struct { void *data; size_t bytes; } *list;
};

struct pack_job {
    const struct matrix *w;
    char *dst;
};

static void pack_groups(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct pack_job *j = arg;
    const size_t group = QUANT_R16_ROWS * j->w->row_bytes;
    quant_r16_pack(j->w->type, (const char *)j->w->data + (size_t)begin * group, j->w->row_bytes,
                   (end - begin) * QUANT_R16_ROWS, j->w->cols, j->dst + (size_t)begin * group);
}

static bool wants_interleave(const struct matrix *w) {
    const struct qtype_traits *tr = quant_traits(w->type);
    return w->data && !w->r16 && tr && tr->gemm_r16 && w->rows % QUANT_R16_ROWS == 0 && w->rows > 0;
}

/* Drops the whole pages of [p, p+n) of the read-only file mapping. */
static void drop_pages(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static int interleave(struct model *m, struct threadpool *pool, struct matrix *w) {
    if (!wants_interleave(w)) return 0;
    if (!m->copies && !(m->copies = calloc(1, sizeof *m->copies))) return moex_errorf("out of memory");
    struct model_copies *c = m->copies;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        void *list = realloc(c->list, sizeof *c->list * (size_t)cap);
        if (!list) return moex_errorf("out of memory");
        c->list = list;
        c->cap = cap;
    }
    size_t bytes = (size_t)w->rows * w->row_bytes;
    void *dst = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dst == MAP_FAILED) return moex_errorf("out of memory for an interleaved copy of %zu MiB", bytes >> 20);
#ifdef MADV_HUGEPAGE
    madvise(dst, bytes, MADV_HUGEPAGE); /* streamed end to end: fewer TLB misses */
#endif
    struct pack_job job = { w, dst };
    threadpool_parallel_for(pool, w->rows / QUANT_R16_ROWS, 16, pack_groups, &job);
    mprotect(dst, bytes, PROT_READ);
    drop_pages(w->data, bytes);
    c->list[c->n].data = dst;
    c->list[c->n].bytes = bytes;
    c->n++;
    w->r16 = dst;
    return 0;
}

int model_interleave(struct model *m, struct threadpool *pool) {
    if (m->plain_rows) return 0;
    /* The dense matrices the architecture bound; they live in its weights,
     * which the model owns (the list is const for the context's readers). */
    for (int i = 0; i < m->n_matrices; i++) {
        struct matrix *w = (struct matrix *)m->matrices[i];
        if (w->data == m->token_embd.data) continue; /* read by rows */
        if (interleave(m, pool, w)) return -1;
    }
    /* A tied head is the embedding's bytes under its own matrix: the head
     * gets the copy, the embedding keeps reading the file's rows. */
    if (m->output.data == m->token_embd.data && interleave(m, pool, &m->output)) return -1;
    /* expert stacks are sliced by rows of whole experts: each must be whole groups */
    for (int l = 0; l < m->moe.n_layers; l++) {
        struct moe_layer_desc *E = &m->moe_layers[l];
        if (E->n_ff % QUANT_R16_ROWS || E->n_embd % QUANT_R16_ROWS) continue;
        if (interleave(m, pool, &E->gate) || interleave(m, pool, &E->up) || interleave(m, pool, &E->down)) return -1;
    }
    return 0;
}

uint64_t model_interleaved_bytes(const struct model *m) {
    uint64_t bytes = 0;
    for (int i = 0; m->copies && i < m->copies->n; i++) bytes += m->copies->list[i].bytes;
    return bytes;
}

void model_interleave_free(struct model *m) {
    if (!m->copies) return;
    for (int i = 0; i < m->copies->n; i++) munmap(m->copies->list[i].data, m->copies->list[i].bytes);
    free(m->copies->list);
    free(m->copies);
    m->copies = NULL;
}
