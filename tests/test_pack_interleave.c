/* The CPU's interleaved layout from a pack file: a run that maps every
 * matrix from the file holds the same bytes as one that repacks them at
 * load and computes byte-identical logits, whether the file holds the
 * layout only or after the device's experts; a file of another model, with a
 * damaged matrix, of another version, or without the layout is not used
 * (the report says why) and the run repacks, with the same logits; a matrix
 * the file holds in another layout variant is repacked alone. The file
 * without device experts is refused by a device run. Uses the oracle
 * Q4_K_M model (Q4_K and Q6_K matrices); skipped where this machine has no
 * interleaved kernel. */
#include "harness.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/xxh64.h"
#include "model/model.h"
#include "model/model_pack.h"
#include "moe/executor.h"
#include "moe/pack_experts.h"
#include "pack/packfile.h"
#include "pack/packfile_format.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct threadpool *pool;
static const int32_t ids[12] = { 1, 5, 9, 14, 2, 7, 11, 3, 8, 13, 4, 6 };
enum { N_IDS = 12 };

static const char *tmp(const char *name) {
    static char buf[4][4096];
    static int next;
    char *out = buf[next++ & 3];
    snprintf(out, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return out;
}

/* Pages of [p, p+n) mapped in this process (/proc/self/pagemap's present
 * bit), or -1 where that cannot be read. */
static int64_t present_pages(const void *p, size_t n) {
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (!f) return -1;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = (uint64_t)(uintptr_t)p / page, last = ((uint64_t)(uintptr_t)p + n - 1) / page;
    int64_t present = 0;
    if (fseek(f, (long)(first * 8), SEEK_SET) != 0) present = -1;
    for (uint64_t i = first; i <= last && present >= 0; i++) {
        uint64_t e;
        if (fread(&e, 8, 1, f) != 1) present = -1;
        else present += (int64_t)(e >> 63);
    }
    fclose(f);
    return present;
}

/* The share of the GGUF's pages of the interleaved matrices that are mapped. */
static double source_resident(struct model *m) {
    int n = model_interleave_targets(m, NULL);
    struct matrix **x = malloc(sizeof *x * (size_t)n);
    model_interleave_targets(m, x);
    int64_t present = 0, pages = 0;
    for (int i = 0; i < n && present >= 0; i++) {
        size_t bytes = (size_t)x[i]->rows * x[i]->row_bytes;
        int64_t k = present_pages(x[i]->data, bytes);
        present = k < 0 ? -1 : present + k;
        pages += (int64_t)(bytes / (size_t)sysconf(_SC_PAGESIZE));
    }
    free(x);
    return present < 0 || pages == 0 ? -1 : (double)present / (double)pages;
}

struct run {
    struct model *m;      /* kept loaded: its layout is compared */
    float *logits;        /* (N_IDS + 2, n_vocab): the prompt's, then two decode steps' */
    struct model_interleave_report report;
    double source_resident; /* after the run: share of the GGUF pages of the interleaved matrices mapped */
    bool ok;
};

/* Loads path afresh (the layout is made once per model), evaluates a
 * prompt and two greedy decode steps with the layout from pack (or none). */
static struct run run_with(const char *model_path, const char *pack) {
    struct run r;
    memset(&r, 0, sizeof r);
    if (!(r.m = model_load(model_path))) return r;
    struct context_params cp = { .n_ctx = 64, .n_batch = 16, .kv_type = KV_F32, .pool = pool, .pack_path = pack };
    struct context *c = context_new(r.m, &cp);
    if (!c) {
        fprintf(stderr, "context: %s\n", moex_error());
        return r;
    }
    int V = r.m->hp.n_vocab;
    r.logits = calloc((size_t)(N_IDS + 2) * V, sizeof(float));
    r.ok = r.logits && context_eval(c, ids, N_IDS, r.logits, true) == 0;
    const float *l = r.logits + (size_t)(N_IDS - 1) * V;
    for (int s = 0; s < 2 && r.ok; s++) {
        int32_t tok = 0;
        for (int i = 1; i < V; i++) if (l[i] > l[tok]) tok = i;
        float *next = r.logits + (size_t)(N_IDS + s) * V;
        r.ok = context_eval(c, &tok, 1, next, false) == 0;
        l = next;
    }
    if (model_interleave_report(r.m)) r.report = *model_interleave_report(r.m);
    r.source_resident = source_resident(r.m);
    context_free(c);
    return r;
}

static void run_free(struct run *r) {
    free(r->logits);
    model_free(r->m);
}

static bool same_logits(const struct run *a, const struct run *b) {
    return a->ok && b->ok && memcmp(a->logits, b->logits, sizeof(float) * (size_t)(N_IDS + 2) * a->m->hp.n_vocab) == 0;
}

/* Every interleaved matrix of a and b holds the same bytes. */
static bool same_layout(struct model *a, struct model *b) {
    int n = model_interleave_targets(a, NULL);
    if (n != model_interleave_targets(b, NULL)) return false;
    struct matrix **x = malloc(sizeof *x * (size_t)n), **y = malloc(sizeof *y * (size_t)n);
    model_interleave_targets(a, x);
    model_interleave_targets(b, y);
    bool same = true;
    for (int i = 0; i < n && same; i++)
        same = x[i]->r16 && y[i]->r16 && x[i]->rows == y[i]->rows &&
               memcmp(x[i]->r16, y[i]->r16, (size_t)x[i]->rows * x[i]->row_bytes) == 0;
    free(x);
    free(y);
    return same;
}

static int write_layout(const char *model_path, const char *out) {
    struct model *m = model_load(model_path);
    uint64_t bytes = 0;
    int rc = m ? model_pack_interleaved_file(m, pool, atomic_file_create(out), &bytes) : -1;
    if (rc) fprintf(stderr, "pack %s: %s\n", out, moex_error());
    model_free(m);
    return rc;
}

static int add_layout(void *user, struct packfile_writer *w) {
    uint64_t bytes;
    return model_pack_interleaved(user, pool, w, &bytes);
}

/* The cpu device's experts (all of them), then the layout, as moex pack --device cpu writes. */
static int write_device_and_layout(const char *model_path, const char *out) {
    struct model *m = model_load(model_path);
    struct moe_exec_options cpu = { .device = "cpu", .hot_fraction = 1.0, .min_m = 1, .pinned_share = -1 };
    struct moe_pack_result r;
    int rc = m ? moe_pack_experts(&m->moe, &cpu, pool, false, atomic_file_create(out), NULL, NULL, add_layout, m, &r)
               : -1;
    if (rc) fprintf(stderr, "pack %s: %s\n", out, moex_error());
    model_free(m);
    return rc;
}

static int patch_file(const char *path, const char *out, void (*patch)(uint8_t *file, size_t size)) {
    size_t size = 0;
    uint8_t *d = read_whole_file(path, &size);
    if (!d) return -1;
    patch(d, size);
    FILE *f = fopen(out, "wb");
    int rc = f && fwrite(d, 1, size, f) == size ? 0 : -1;
    if (f && fclose(f)) rc = -1;
    free(d);
    return rc;
}

static uint8_t *host_index(uint8_t *d) { return d + pf_get64(d + PF_H_SECTIONS + 4 * PF_SECTION_BYTES + 8); }

static void flip_host_byte(uint8_t *d, size_t size) {
    (void)size;
    d[pf_get64(host_index(d) + PF_X_OFFSET) + 1000] ^= 0x20; /* the first matrix's data */
}

static void old_version(uint8_t *d, size_t size) {
    (void)size;
    pf_put32(d + PF_H_VERSION, PF_VERSION - 1);
}

/* The last matrix in layout variant 7, with every checksum repaired. */
static void other_variant(uint8_t *d, size_t size) {
    (void)size;
    uint32_t n = pf_get32(d + PF_H_N_HOST);
    uint8_t *sec = d + PF_H_SECTIONS + 4 * PF_SECTION_BYTES;
    pf_put32(host_index(d) + (size_t)(n - 1) * PF_HOST_ENTRY_BYTES + PF_X_VARIANT, 7);
    pf_put64(sec + 24, xxh64(host_index(d), (size_t)n * PF_HOST_ENTRY_BYTES, 0));
    pf_put64(d + PF_H_CHECKSUM, xxh64(d, PF_H_CHECKSUM, 0));
}

int main(void) {
    const char *model = oracle_path("models/qwen3moe-o1-Q4_K_M.gguf");
    pool = threadpool_new(2, false);
    struct model *probe = model_load(model);
    CHECKF(probe != NULL, "%s", moex_error());
    if (!probe) return test_finish();
    int targets = model_interleave_targets(probe, NULL);
    model_free(probe);
    if (targets == 0) {
        printf("SKIP: this machine has no interleaved kernel (%s): nothing is laid out\n", isa_name(quant_active_isa()));
        threadpool_free(pool);
        return 77;
    }
    char pack[4096];
    snprintf(pack, sizeof pack, "%s", tmp("layout.mxpk"));
    CHECK(write_layout(model, pack) == 0);
    struct packfile *pf = NULL;
    CHECKF(packfile_open(pack, &pf) == PACKFILE_OK, "%s", moex_error());
    if (pf) {
        const struct packfile_info *in = packfile_info(pf);
        CHECK(in->no_device && in->n_entries == 0 && in->n_host == targets);
        for (int i = 0; i < in->n_host; i++) CHECK(packfile_verify_host_entry(pf, i) == PACKFILE_OK);
        packfile_close(pf);
    }

    /* Mapped from the file: every matrix, the bytes and the logits of a repacking run. */
    struct run live = run_with(model, NULL), mapped = run_with(model, pack);
    CHECK(live.ok && mapped.ok);
    CHECK(live.report.repacked == targets && live.report.mapped == 0);
    CHECKF(mapped.report.mapped == targets && mapped.report.repacked == 0 && !mapped.report.refused,
           "mapped %d, repacked %d of %d: %s", mapped.report.mapped, mapped.report.repacked, targets,
           mapped.report.message);
    CHECK(mapped.report.mapped_bytes > 0);
    CHECK(live.m && mapped.m && same_layout(live.m, mapped.m));
    CHECK(same_logits(&live, &mapped));
    /* Prefill and decode read the interleaved copy only: the GGUF's pages of
     * those matrices are not mapped, whether the copy was repacked (their
     * pages dropped) or mapped from the file (never read but for the
     * identity's samples). */
    if (live.source_resident < 0) {
        printf("note: /proc/self/pagemap cannot be read: which copy a run reads is not checked\n");
    } else {
        printf("GGUF pages of the interleaved matrices mapped after a run: %.1f%% repacked, %.1f%% from the file\n",
               100 * live.source_resident, 100 * mapped.source_resident);
        CHECK(live.source_resident < 0.05 && mapped.source_resident < 0.05);
    }
    run_free(&mapped);

    /* A file with device experts holds the layout after them. */
    CHECK(write_device_and_layout(model, tmp("both.mxpk")) == 0);
    struct run both = run_with(model, tmp("both.mxpk"));
    CHECKF(both.report.mapped == targets && same_logits(&live, &both) && same_layout(live.m, both.m), "mapped %d: %s",
           both.report.mapped, both.report.message);
    run_free(&both);
    unlink(tmp("both.mxpk"));

    /* Not used, said why, repacked: the same logits. */
    struct {
        const char *what, *message;
        void (*patch)(uint8_t *, size_t);
        const char *model;
    } refused[] = {
        { "a damaged matrix", "bad checksum in section host data", flip_host_byte, NULL },
        { "an older version", "pack file version 2; this moex reads version 3", old_version, NULL },
        { "another model", "packed from another model", NULL, "models/qwen3moe-o1-Q5_K_M.gguf" },
        { "not a pack file", "not a moex pack file", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *path = tmp("bad.mxpk");
        if (refused[i].patch) CHECK(patch_file(pack, path, refused[i].patch) == 0);
        else if (refused[i].model) CHECK(write_layout(oracle_path(refused[i].model), path) == 0);
        else path = model;
        struct run r = run_with(model, path);
        CHECKF(r.report.refused && strstr(r.report.message, refused[i].message) && r.report.mapped == 0 &&
                   r.report.repacked == targets,
               "%s: refused %d, mapped %d: %s", refused[i].what, r.report.refused, r.report.mapped, r.report.message);
        CHECKF(same_logits(&live, &r) && same_layout(live.m, r.m), "%s: other numbers than a repacking run",
               refused[i].what);
        run_free(&r);
        if (path != model) unlink(path);
    }

    /* One matrix in another layout variant: it alone is repacked. */
    CHECK(patch_file(pack, tmp("variant.mxpk"), other_variant) == 0);
    struct run v = run_with(model, tmp("variant.mxpk"));
    CHECKF(!v.report.refused && v.report.other_variant == 1 && v.report.file_variant == 7 &&
               v.report.mapped == targets - 1 && v.report.repacked == 1,
           "refused %d, other variant %d, mapped %d: %s", v.report.refused, v.report.other_variant, v.report.mapped,
           v.report.message);
    CHECK(same_logits(&live, &v) && same_layout(live.m, v.m));
    run_free(&v);
    unlink(tmp("variant.mxpk"));

    /* A device run refuses a file without device experts, and still maps the layout. */
    struct moe_exec_options cpu = { .device = "cpu", .hot_fraction = 1.0, .min_m = 1, .pinned_share = -1,
                                    .pack_path = pack };
    struct model *m = model_load(model);
    struct context_params cp = { .n_ctx = 64, .n_batch = 16, .kv_type = KV_F32, .pool = pool, .experts = &cpu,
                                 .pack_path = pack };
    struct context *c = m ? context_new(m, &cp) : NULL;
    CHECK(c != NULL);
    if (c) {
        const struct moe_pack_report *r = moe_executor_pack_report(context_executor(c));
        CHECKF(r->status == PACKFILE_E_LAYOUT && strstr(r->message, "holds no device experts"), "%d: %s", r->status,
               r->message);
        CHECK(model_interleave_report(m) && model_interleave_report(m)->mapped == targets);
        context_free(c);
    }
    model_free(m);

    run_free(&live);
    unlink(pack);
    threadpool_free(pool);
    return test_finish();
}
