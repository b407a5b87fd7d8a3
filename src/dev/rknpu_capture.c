/* Golden captures (rknpu_capture.h). */
#include "dev/rknpu_capture.h"

#include "core/error.h"
#include "dev/rknpu_gen.h"
#include "dev/rknpu_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_MAGIC "MOEXNPU1"
#define CAP_MAX_REGIONS 2048
#define CAP_MAX_BYTES (1ull << 32)

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int rknpu_capture_write(const char *path, bool chained, int programs, const struct rknpu_capture_region *r, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint8_t h[24];
    memcpy(h, CAP_MAGIC, 8);
    put32(h + 8, chained);
    put32(h + 12, (uint32_t)programs);
    put32(h + 16, (uint32_t)n);
    put32(h + 20, 0);
    bool ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (int i = 0; i < n && ok; i++) {
        uint8_t rh[16];
        put32(rh, r[i].kind);
        put32(rh + 4, r[i].va);
        put32(rh + 8, (uint32_t)r[i].bytes);
        put32(rh + 12, (uint32_t)(r[i].bytes >> 32));
        ok = fwrite(rh, 1, sizeof rh, f) == sizeof rh && fwrite(r[i].data, 1, r[i].bytes, f) == r[i].bytes;
    }
    int err = errno;
    if (fclose(f) != 0) ok = false;
    errno = err;
    return ok ? 0 : -1;
}

struct region {
    uint32_t kind, va;
    uint64_t bytes;
    uint8_t *data; /* in the file's buffer */
};

struct replay {
    struct region r[CAP_MAX_REGIONS];
    int n;
    uint8_t *out; /* the model's output, in place of the recorded one */
};

static int8_t *resolve(void *ctx, uint32_t va, uint64_t bytes, bool write, int *buffer) {
    struct replay *p = ctx;
    for (int i = 0; i < p->n; i++) {
        const struct region *r = &p->r[i];
        if (va < r->va || va - r->va > r->bytes || bytes > r->bytes - (va - r->va)) continue;
        if (write != (r->kind == RKNPU_CAP_OUTPUT)) return NULL; /* the output region only is written */
        *buffer = i;
        return (int8_t *)(r->kind == RKNPU_CAP_OUTPUT ? p->out : r->data) + (va - r->va);
    }
    return NULL;
}

int rknpu_capture_replay(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return moex_errorf("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = size > 24 ? malloc((size_t)size) : NULL;
    bool read_ok = buf && fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!read_ok || memcmp(buf, CAP_MAGIC, 8) != 0) {
        free(buf);
        return moex_errorf("%s: not a capture (no %s header)", path, CAP_MAGIC);
    }
    struct replay *p = calloc(1, sizeof *p);
    if (!p) {
        free(buf);
        return moex_errorf("out of memory");
    }
    bool chained = get32(buf + 8) != 0;
    int programs = (int)get32(buf + 12), n = (int)get32(buf + 16), rc = -1;
    uint64_t at = 24;
    struct region *programs_region = NULL, *output = NULL;
    for (int i = 0; i < n; i++) {
        if (n > CAP_MAX_REGIONS || at + 16 > (uint64_t)size) goto bad;
        struct region *r = &p->r[p->n++];
        r->kind = get32(buf + at);
        r->va = get32(buf + at + 4);
        r->bytes = get32(buf + at + 8) | (uint64_t)get32(buf + at + 12) << 32;
        at += 16;
        if (r->bytes > CAP_MAX_BYTES || at + r->bytes > (uint64_t)size) goto bad;
        r->data = buf + at;
        at += r->bytes;
        if (r->kind == RKNPU_CAP_PROGRAMS) programs_region = r;
        if (r->kind == RKNPU_CAP_OUTPUT) output = r;
    }
    if (!programs_region || !output || programs < 1 ||
        (uint64_t)programs * RKNPU_PROGRAM_WORDS * 8 > programs_region->bytes) {
    bad:
        moex_errorf("%s: a damaged capture (regions past the end, or no programs or output)", path);
        goto done;
    }
    p->out = calloc(1, output->bytes ? output->bytes : 1);
    if (!p->out) {
        moex_errorf("out of memory");
        goto done;
    }
    memset(p->out, 0xA5, output->bytes); /* what the model leaves unwritten cannot match by luck */
    struct rknpu_mem_view view = {p, resolve};
    struct rknpu_run_stats st = {0};
    char why[256] = "";
    int code = RKNPU_RUN_OK, wb = -1;
    if (chained) {
        code = rknpu_model_run(&view, programs_region->va, RKNPU_PROGRAM_WORDS, programs, true, &wb, &st, why, sizeof why);
    } else {
        for (int i = 0; i < programs && code == RKNPU_RUN_OK; i++) {
            wb = -1;
            code = rknpu_model_run(&view, programs_region->va + (uint32_t)i * RKNPU_PROGRAM_WORDS * 8,
                                   RKNPU_PROGRAM_WORDS, 1, false, &wb, &st, why, sizeof why);
        }
    }
    if (code != RKNPU_RUN_OK) {
        moex_errorf("%s: the model refuses it: %s", path, why);
        goto done;
    }
    for (uint64_t i = 0; i < output->bytes; i++)
        if (p->out[i] != output->data[i]) {
            moex_errorf("%s: output byte %llu (NPU VA 0x%llx) is 0x%02x, the device wrote 0x%02x", path,
                        (unsigned long long)i, (unsigned long long)(output->va + i), p->out[i], output->data[i]);
            goto done;
        }
    rc = 0;
done:
    free(p->out);
    free(p);
    free(buf);
    return rc;
}
