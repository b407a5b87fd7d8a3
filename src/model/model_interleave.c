/* The CPU's own layout of the weights: Q4_K/Q6_K matrices in rows
 * interleaved by 16 (quant_r16_pack) where the selected kernels have an r16
 * one (AVX-512 VNNI, AVX2 with AVX-VNNI where present, NEON dotprod: on x86
 * they beat the plain rows at decode and prefill alike, bench/r16.md; NEON's
 * are checked under emulation only, not timed), once per model. From a pack
 * file (moex pack) when it holds a matrix's interleaved bytes in this
 * machine's variant (one for every ISA): mapped from the file, not copied,
 * and hashed against their checksum before use; the
 * GGUF's bytes of that matrix are never read. Otherwise repacked at load
 * into anonymous memory, and the file's pages dropped from the process
 * (they stay in the page cache and fault back in only where something reads
 * them: a device packing experts from the file's layout), so resident
 * memory is one copy of the model either way. */
#include "model/model.h"
#include "model/model_pack.h"

#include "core/error.h"
#include "core/threadpool.h"
#include "gguf/gguf.h"
#include "pack/packfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct model_copies {
    void *arena;             /* the repacked copies, one after the other; or NULL */
    size_t arena_bytes;      /* mapped */
    uint64_t copied_bytes;   /* the copies' own bytes in it */
    struct packfile *pack;   /* the pack file mapped matrices point into, or NULL */
    struct model_interleave_report report;
};

/* Asks for huge pages on the whole pages of [p, p+n). Advice only: small
 * pages work too. */
static void advise_huge(const void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

/* Copies start on a page: a group never straddles one needlessly. */
enum { COPY_ALIGN = 4096 };
#define HUGE_PAGE ((size_t)2 << 20)

static bool wants_interleave(const struct matrix *w) {
    const struct qtype_traits *tr = quant_traits(w->type);
    return w->data && tr && tr->gemm_r16 && w->rows % QUANT_R16_ROWS == 0 && w->rows > 0;
}

static int add_target(struct matrix *w, struct matrix **out, int n) {
    if (!wants_interleave(w)) return n;
    if (out) out[n] = w;
    return n + 1;
}

int model_interleave_targets(struct model *m, struct matrix **out) {
    int n = 0;
    /* The dense matrices the architecture bound; they live in its weights,
     * which the model owns (the list is const for the context's readers). */
    for (int i = 0; i < m->n_matrices; i++) {
        struct matrix *w = (struct matrix *)m->matrices[i];
        if (w->data != m->token_embd.data) n = add_target(w, out, n); /* the embedding is read by rows */
    }
    /* A tied head is the embedding's bytes under its own matrix: the head
     * gets the layout, the embedding keeps reading the file's rows. */
    if (m->output.data == m->token_embd.data) n = add_target(&m->output, out, n);
    /* expert stacks are sliced by rows of whole experts: each must be whole groups */
    for (int l = 0; l < m->moe.n_layers; l++) {
        struct moe_layer_desc *E = &m->moe_layers[l];
        if (E->n_ff % QUANT_R16_ROWS || E->n_embd % QUANT_R16_ROWS) continue;
        n = add_target(&E->gate, out, n);
        n = add_target(&E->up, out, n);
        n = add_target(&E->down, out, n);
    }
    return n;
}

uint64_t model_source_offset(const struct model *m, const struct matrix *w) {
    return (uint64_t)((const uint8_t *)w->data - m->file->map);
}

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

/* Drops the whole pages of [p, p+n) of the read-only file mapping. */
static void drop_pages(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void model_interleave_into(struct threadpool *pool, const struct matrix *w, void *dst) {
    struct pack_job job = { w, dst };
    threadpool_parallel_for(pool, w->rows / QUANT_R16_ROWS, 16, pack_groups, &job);
    drop_pages(w->data, (size_t)w->rows * w->row_bytes);
}

static size_t copy_bytes(const struct matrix *w) {
    return ((size_t)w->rows * w->row_bytes + COPY_ALIGN - 1) / COPY_ALIGN * COPY_ALIGN;
}

/* Anonymous memory on a huge-page boundary, in huge pages where the kernel
 * has them: decode streams every copy end to end, and in 4 KiB pages the
 * 17 GiB of a 48-layer model are 4.5M pages, a TLB miss every 4 KiB of each
 * stream. One mapping for all the copies: a mapping per matrix left the
 * ends of each in small pages. */
static void *map_arena(size_t bytes, size_t *mapped) {
    size_t len = bytes + HUGE_PAGE;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = lo - (uintptr_t)p, tail = len - head - bytes;
    if (head) munmap(p, head);
    if (tail) munmap((uint8_t *)lo + bytes, tail);
    advise_huge((void *)lo, bytes);
    *mapped = bytes;
    return (void *)lo;
}

/* Where the kernel gave small pages (no free huge page at fault time: the
 * page cache holds most of memory while the GGUF is read), it copies them
 * into huge pages now. Best effort: small pages are only slower. */
static void collapse(void *p, size_t bytes) {
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
    madvise(p, bytes, MADV_COLLAPSE);
}

/* Repacks the n targets without an r16 copy into one arena. */
static int repack_all(struct model_copies *c, struct threadpool *pool, struct matrix **targets, int n) {
    size_t total = 0;
    for (int t = 0; t < n; t++)
        if (!targets[t]->r16) total += copy_bytes(targets[t]);
    if (!total) return 0;
    total = (total + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    uint8_t *arena = map_arena(total, &c->arena_bytes);
    if (!arena) return moex_errorf("out of memory for interleaved copies of %zu MiB", total >> 20);
    c->arena = arena;
    size_t at = 0, collapsed = 0;
    for (int t = 0; t < n; t++) {
        struct matrix *w = targets[t];
        if (w->r16) continue;
        model_interleave_into(pool, w, arena + at);
        w->r16 = arena + at;
        at += copy_bytes(w);
        c->copied_bytes += (uint64_t)w->rows * w->row_bytes;
        c->report.repacked++;
        /* the huge pages filled so far, while their bytes are warm */
        size_t done = at / HUGE_PAGE * HUGE_PAGE;
        if (done > collapsed) collapse(arena + collapsed, done - collapsed), collapsed = done;
    }
    if (c->arena_bytes > collapsed) collapse(arena + collapsed, c->arena_bytes - collapsed);
    mprotect(arena, c->arena_bytes, PROT_READ);
    return 0;
}

struct verify_job {
    const struct packfile *pf;
    const int *entry; /* (n) host entries to hash */
    bool *bad;        /* (n) */
};

static void verify_range(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    struct verify_job *j = arg;
    for (int64_t i = begin; i < end; i++) j->bad[i] = packfile_verify_host_entry(j->pf, j->entry[i]) != PACKFILE_OK;
}

/* The host entry for w when it is this matrix in this machine's variant,
 * else -1 (counted in r). */
static int matching_entry(const struct model *m, const struct packfile *pf, const struct matrix *w,
                          struct model_interleave_report *r) {
    int i = packfile_host_find(pf, model_source_offset(m, w));
    const struct packfile_host_entry *x = packfile_host_entry(pf, i);
    if (!x) return r->missing++, -1;
    if (x->source_type != (uint32_t)w->type || x->rows != w->rows || x->cols != w->cols ||
        x->bytes != (uint64_t)w->rows * w->row_bytes)
        return r->missing++, -1;
    if (x->variant != quant_r16_variant(w->type)) {
        r->other_variant++;
        r->file_variant = x->variant;
        return -1;
    }
    return i;
}

/* Maps the targets that the pack file at path holds, verified; says in
 * c->report why the others are repacked. */
static int map_from_pack(struct model *m, struct threadpool *pool, struct matrix **targets, int n,
                         const struct packfile_shared *pack) {
    struct model_copies *c = m->copies;
    struct model_interleave_report *r = &c->report;
    if (n <= 0) return 0;
    struct packfile *pf = NULL;
    struct packfile_info want;
    int rc = packfile_take(pack, &pf);
    if (rc == PACKFILE_OK) rc = model_pack_describe(m, &want);
    if (rc == PACKFILE_OK)
        rc = packfile_check_model(pf, &want.model, want.n_layers, want.n_expert, want.n_embd, want.n_ff,
                                  want.source_type);
    if (rc != PACKFILE_OK) {
        r->refused = true;
        snprintf(r->message, sizeof r->message, "%s", moex_error());
        packfile_close(pf);
        return 0;
    }
    /* The identity's samples mapped pages of the GGUF (whole large folios,
     * where the page cache has them): dropped before the file's copies are
     * read, so the peak does not hold both. */
    for (int t = 0; t < n; t++) drop_pages(targets[t]->data, (size_t)targets[t]->rows * targets[t]->row_bytes);
    int *entry = malloc(sizeof *entry * (size_t)n), *target = malloc(sizeof *target * (size_t)n);
    bool *bad = calloc((size_t)n, sizeof *bad);
    if (!entry || !target || !bad) {
        free(entry), free(target), free(bad);
        packfile_close(pf);
        return moex_errorf("out of memory");
    }
    int found = 0;
    for (int t = 0; t < n; t++) {
        int i = matching_entry(m, pf, targets[t], r);
        if (i >= 0) entry[found] = i, target[found++] = t;
    }
    /* Before the hash reads them: the faults that read the file in then
     * take it in huge folios, mapped by huge pages, where the file system
     * has them (as the anonymous copies are; see map_arena). */
    for (int k = 0; k < found; k++) {
        const struct packfile_host_entry *x = packfile_host_entry(pf, entry[k]);
        advise_huge(x->data, (size_t)x->bytes);
    }
    struct verify_job job = { pf, entry, bad };
    threadpool_parallel_for(pool, found, 1, verify_range, &job);
    for (int k = 0; k < found && !r->refused; k++)
        if (bad[k]) {
            packfile_verify_host_entry(pf, entry[k]); /* again on this thread, for the message */
            r->refused = true;
            snprintf(r->message, sizeof r->message, "%s", moex_error());
        }
    for (int k = 0; k < found && !r->refused; k++) targets[target[k]]->r16 = packfile_host_entry(pf, entry[k])->data;
    r->mapped = r->refused ? 0 : found;
    r->mapped_bytes = 0;
    for (int k = 0; k < r->mapped; k++) r->mapped_bytes += packfile_host_entry(pf, entry[k])->bytes;
    if (r->mapped) c->pack = pf;
    else packfile_close(pf);
    free(entry), free(target), free(bad);
    return 0;
}

int model_interleave(struct model *m, struct threadpool *pool, const struct packfile_shared *pack) {
    if (m->copies) return 0; /* once per model */
    if (m->plain_rows) return 0;
    if (!(m->copies = calloc(1, sizeof *m->copies))) return moex_errorf("out of memory");
    struct model_copies *c = m->copies;
    int n = model_interleave_targets(m, NULL);
    struct matrix **targets = malloc(sizeof *targets * (size_t)(n ? n : 1));
    if (!targets) return moex_errorf("out of memory");
    model_interleave_targets(m, targets);
    if (pack) snprintf(c->report.path, sizeof c->report.path, "%s", pack->path);
    c->report.targets = n;
    int rc = pack && n ? map_from_pack(m, pool, targets, n, pack) : 0;
    if (rc == 0) rc = repack_all(c, pool, targets, n);
    free(targets);
    return rc;
}

uint64_t model_interleaved_bytes(const struct model *m) {
    return m->copies ? m->copies->copied_bytes + m->copies->report.mapped_bytes : 0;
}

const struct model_interleave_report *model_interleave_report(const struct model *m) {
    return m->copies ? &m->copies->report : NULL;
}

void model_interleave_free(struct model *m) {
    if (!m->copies) return;
    if (m->copies->arena) munmap(m->copies->arena, m->copies->arena_bytes);
    packfile_close(m->copies->pack);
    free(m->copies);
    m->copies = NULL;
}
