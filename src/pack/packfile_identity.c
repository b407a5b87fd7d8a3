/* Which GGUF a pack file belongs to, cheaply: a 17 GB model cannot be hashed
 * in full at every start (seconds), so the identity hashes what changes
 * whenever the model does and a sample of the rest. docs/pack-format.md
 * specifies the bytes; in short: the whole header (metadata and tensor
 * infos: names, types, shapes, offsets), then per tensor its index, size
 * and 4 KiB samples at 4 + size / 16 MiB evenly spaced offsets (the whole
 * tensor when that is smaller). A re-quantized, re-synthesized or edited
 * model changes the header or nearly every sample; an in-place edit of a
 * few bytes between samples changes the file's modification time (and a
 * rewrite its inode), which the identity holds too: only an edit between
 * samples whose time was set back goes unseen, the price of a start that
 * reads megabytes, not the whole model. */
#include "pack/packfile.h"

#include "core/error.h"
#include "core/xxh64.h"
#include "gguf/gguf.h"
#include "pack/packfile_format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SAMPLE_BYTES 4096ull
#define SAMPLE_STRIDE (16ull << 20)
#define MAX_SAMPLES 1024ull

int packfile_model_identity(const struct gguf_file *f, struct packfile_identity *out) {
    if (!f || !out) return moex_errorf("packfile_model_identity: no file or result"), PACKFILE_E_ARG;
    struct xxh64_state s;
    xxh64_init(&s, 0);
    xxh64_update(&s, f->map, (size_t)f->data_offset);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        const uint8_t *data = t->data;
        uint8_t head[16];
        pf_put64(head, i);
        pf_put64(head + 8, t->nbytes);
        xxh64_update(&s, head, sizeof head);
        uint64_t k = 4 + t->nbytes / SAMPLE_STRIDE;
        if (k > MAX_SAMPLES) k = MAX_SAMPLES;
        if (t->nbytes <= k * SAMPLE_BYTES) {
            xxh64_update(&s, data, (size_t)t->nbytes);
            continue;
        }
        for (uint64_t j = 0; j < k; j++) {
            uint64_t at = j * (t->nbytes - SAMPLE_BYTES) / (k - 1);
            xxh64_update(&s, data + at, SAMPLE_BYTES);
        }
    }
    out->gguf_size = f->file_size;
    out->hash = xxh64_digest(&s);
    out->mtime_ns = f->mtime_ns;
    out->inode = f->inode;
    return PACKFILE_OK;
}

int packfile_hash_file(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return moex_errorf("%s: cannot open: %s", path, strerror(errno)), PACKFILE_E_IO;
    struct xxh64_state s;
    xxh64_init(&s, 0);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) xxh64_update(&s, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) return moex_errorf("%s: read error", path), PACKFILE_E_IO;
    *out = xxh64_digest(&s);
    return PACKFILE_OK;
}
