/* A device's slots: packing a GGUF weight in (dev_pack), loading packed
 * bytes (dev_load_packed), importing a pack file's codes (dev_import_codes)
 * and reading a slot back (dev_slot_view), validated here for every backend. */
#include "dev/dev_impl.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "dev/sim.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/cpu.h"

void dev_slot_shape(const struct dev *d, int slot, int *K, int *N) {
    bool ok = d && d->slots && slot >= 0 && slot < d->n_slots;
    if (K) *K = ok ? d->slots[slot].K : 0;
    if (N) *N = ok ? d->slots[slot].N : 0;
}

static int check_shape(const struct dev *d, int K, int N) {
    const struct dev_caps *c = &d->caps;
    if (K <= 0 || N <= 0 || K % c->k_multiple || N % c->n_multiple || K > c->k_max || N > c->n_max) {
        moex_errorf("%s: a %d x %d weight is outside the envelope (K %% %d, N %% %d, K <= %d, N <= %d)", c->name, K,
                    N, c->k_multiple, c->n_multiple, c->k_max, c->n_max);
        return DEV_E_SHAPE;
    }
    return DEV_OK;
}

static int pack_into(struct dev *d, int slot, enum qtype type, const void *data, int K, int N) {
    const char *name = d->caps.name;
    if (!data) return moex_errorf("%s: pack without data", name), DEV_E_ARG;
    if (!d->slots) return moex_errorf("%s: pack before the slot pool is allocated", name), DEV_E_STATE;
    if (slot < 0 || slot >= d->n_slots) return moex_errorf("%s: slot %d of %d", name, slot, d->n_slots), DEV_E_ARG;
    d->slots[slot].K = d->slots[slot].N = 0;
    int rc = check_shape(d, K, N);
    if (rc != DEV_OK) return rc;
    /* W8A8 slots hold slot_values codes; a block device's slots, bytes of GGUF rows */
    bool blocks = d->caps.compute == DEV_COMPUTE_BLOCKS;
    if (blocks && !dev_caps_takes(&d->caps, type))
        return moex_errorf("%s: %s weights stay on the CPU", name, quant_type_name(type)), DEV_E_TYPE;
    bool fits = blocks ? quant_row_size(type, K) * (uint64_t)N <= dev_slot_capacity(d, slot) : (int64_t)K * N <= d->slot_values;
    if (!fits || N > d->max_n || K > d->max_k) {
        moex_errorf("%s: a %d x %d %s weight does not fit slot %d (%lld values, %llu bytes, %d channels)", name, K, N,
                    quant_type_name(type), slot, (long long)d->slot_values,
                    (unsigned long long)dev_slot_capacity(d, slot), d->max_n);
        return DEV_E_SHAPE;
    }
    dev_stream_drain(d);
    int64_t t0 = time_ns();
    if (d->ops->pack) { /* a block device: the rows as they are */
        rc = d->ops->pack(d, slot, type, data, K, N);
        if (rc != DEV_OK) return rc;
        uint64_t bytes = quant_row_size(type, K) * (uint64_t)N;
        d->slots[slot].K = K;
        d->slots[slot].N = N;
        d->counters.pack_bytes_read += bytes;
        d->counters.pack_bytes_written += bytes;
        d->counters.uploads++;
        d->counters.upload_bytes += bytes;
        d->counters.pack_ns += (uint64_t)(time_ns() - t0);
        return DEV_OK;
    }
    int8_t *codes = d->pack_stage ? d->pack_stage : (int8_t *)dev_slot_codes(d, slot);
    float *scales =
        d->pack_stage ? (float *)(void *)(d->pack_stage + d->slot_code_bytes) : (float *)dev_slot_scales(d, slot);
    if (!d->pack_stage) dev_mem_open(d);
    int prc = pack_matrix(d->pool, PACK_PATH_BEST, type, data, K, N, d->layout, codes, scales);
    if (!d->pack_stage) dev_mem_close(d);
    uint64_t measured = (uint64_t)(time_ns() - t0);
    if (prc == PACK_OK && d->pack_stage) { /* the upload */
        size_t code_bytes = pack_bytes(d->layout, K, N);
        dev_mem_open(d);
        memcpy((int8_t *)dev_slot_codes(d, slot), codes, code_bytes);
        memcpy((float *)dev_slot_scales(d, slot), scales, (size_t)N * sizeof(float));
        dev_mem_close(d);
        d->counters.uploads++;
        d->counters.upload_bytes += code_bytes + (uint64_t)N * sizeof(float);
    }
    if (prc != PACK_OK) {
        moex_errorf("%s: packing a %d x %d %s weight: %s", name, K, N, quant_type_name(type), pack_status_string(prc));
        return prc == PACK_E_VALUE ? DEV_E_VALUE : prc == PACK_E_SHAPE ? DEV_E_SHAPE : DEV_E_TYPE;
    }
    d->slots[slot].K = K;
    d->slots[slot].N = N;
    d->counters.pack_bytes_read += quant_row_size(type, K) * (uint64_t)N;
    d->counters.pack_bytes_written += pack_bytes(d->layout, K, N) + (uint64_t)N * sizeof(float);
    d->counters.pack_ns += d->ops->pack_cost ? d->ops->pack_cost(d, K, N, measured) : measured;
    return DEV_OK;
}

int dev_pack(struct dev *d, int slot, enum qtype type, const void *data, int K, int N) {
    if (!d) return moex_errorf("dev_pack: no device"), DEV_E_ARG;
    int rc = pack_into(d, slot, type, data, K, N);
    if (rc == DEV_OK) d->counters.packs++;
    else d->counters.failed_packs++;
    return rc;
}

enum pack_layout dev_layout(const struct dev *d) { return d ? d->layout : PACK_ROWS; }

/* The time a load counts: on the NPU model the DMA fill of the bytes on its
 * virtual clock (the host copy is not the board's cost), else the copy. */
static uint64_t load_cost(struct dev *d, uint64_t bytes, uint64_t measured_ns) {
    struct sim *s = dev_sim(d);
    if (!s) return measured_ns;
    double ns = sim_fill_ns(s, bytes);
    sim_advance(s, ns);
    return (uint64_t)ns;
}

static int load_into(struct dev *d, int slot, enum pack_layout layout, const int8_t *codes, const float *scales,
                     int K, int N) {
    const char *name = d->caps.name;
    if (!scales) return moex_errorf("%s: load without scales", name), DEV_E_ARG;
    if (!d->slots) return moex_errorf("%s: load before the slot pool is allocated", name), DEV_E_STATE;
    if (slot < 0 || slot >= d->n_slots) return moex_errorf("%s: slot %d of %d", name, slot, d->n_slots), DEV_E_ARG;
    d->slots[slot].K = d->slots[slot].N = 0;
    if (d->caps.compute == DEV_COMPUTE_BLOCKS)
        return moex_errorf("%s: slots hold GGUF rows, placed by dev_pack; there is no packed copy to load", name),
               DEV_E_LAYOUT;
    if (layout != d->layout)
        return moex_errorf("%s: a weight packed in layout %d, the device's is %d", name, (int)layout, (int)d->layout),
               DEV_E_LAYOUT;
    int rc = check_shape(d, K, N);
    if (rc != DEV_OK) return rc;
    if ((int64_t)K * N > d->slot_values || N > d->max_n || K > d->max_k || pack_check_shape(layout, K, N) != PACK_OK) {
        moex_errorf("%s: a %d x %d weight does not fit the slots (%lld values, %d channels)", name, K, N,
                    (long long)d->slot_values, d->max_n);
        return DEV_E_SHAPE;
    }
    for (int n = 0; n < N; n++)
        if (!isfinite(scales[n]) || scales[n] < 0)
            return moex_errorf("%s: channel %d of a packed weight has scale %g", name, n, (double)scales[n]), DEV_E_VALUE;
    size_t code_bytes = pack_bytes(layout, K, N), scale_bytes = (size_t)N * sizeof(float);
    if (codes && !pack_codes_in_range(codes, code_bytes))
        return moex_errorf("%s: a packed weight holds the code -128 (codes are -127..127)", name), DEV_E_VALUE;
    dev_stream_drain(d);
    int64_t t0 = time_ns();
    dev_mem_open(d);
    if (codes) memcpy((int8_t *)dev_slot_codes(d, slot), codes, code_bytes);
    memcpy((float *)dev_slot_scales(d, slot), scales, scale_bytes);
    dev_mem_close(d);
    uint64_t measured = (uint64_t)(time_ns() - t0);
    d->slots[slot].K = K;
    d->slots[slot].N = N;
    d->counters.load_bytes += code_bytes + scale_bytes;
    d->counters.load_ns += load_cost(d, code_bytes + scale_bytes, measured);
    return DEV_OK;
}

int dev_load_packed(struct dev *d, int slot, enum pack_layout layout, const int8_t *codes, const float *scales,
                    int K, int N) {
    if (!d) return moex_errorf("dev_load_packed: no device"), DEV_E_ARG;
    int rc = load_into(d, slot, layout, codes, scales, K, N);
    if (rc == DEV_OK) d->counters.loads++;
    else d->counters.failed_packs++;
    return rc;
}

size_t dev_slot_code_stride(const struct dev *d) { return d && d->slots ? d->slot_code_bytes : 0; }

/* The codes of slots [first, first + n) read from fd into device memory. */
static int import_copy(struct dev *d, int first, int n, int fd, uint64_t offset) {
    int8_t *addr = d->codes + (size_t)first * d->slot_code_bytes;
    size_t len = (size_t)n * d->slot_code_bytes, done = 0;
    int err = 0;
    int64_t t0 = time_ns();
    dev_mem_open(d);
    while (done < len) {
        ssize_t got = pread(fd, addr + done, len - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            err = got < 0 ? errno : 0;
            break;
        }
        done += (size_t)got;
    }
    dev_mem_close(d);
    if (done < len)
        return moex_errorf("%s: reading %zu bytes of slots from a file: %s", d->caps.name, len,
                           err ? strerror(err) : "the file is shorter"),
               DEV_E_DEVMEM;
    d->counters.uploads++;
    d->counters.upload_bytes += len;
    d->counters.load_ns += load_cost(d, len, (uint64_t)(time_ns() - t0));
    return DEV_OK;
}

int dev_import_codes(struct dev *d, int first, int n, int fd, uint64_t offset) {
    if (!d) return moex_errorf("dev_import_codes: no device"), DEV_E_ARG;
    const char *name = d->caps.name;
    if (!d->slots) return moex_errorf("%s: import before the slot pool is allocated", name), DEV_E_STATE;
    if (first < 0 || n < 1 || first > d->n_slots - n || fd < 0)
        return moex_errorf("%s: importing slots %d..%d of %d", name, first, first + n - 1, d->n_slots), DEV_E_ARG;
    if (d->caps.compute == DEV_COMPUTE_BLOCKS)
        return moex_errorf("%s: slots hold GGUF rows, placed by dev_pack; there are no codes to import", name),
               DEV_E_LAYOUT;
    dev_stream_drain(d);
    for (int s = first; s < first + n; s++) d->slots[s].K = d->slots[s].N = 0;
    if (!d->caps.maps_host_pages) return import_copy(d, first, n, fd, offset);
    long page = sysconf(_SC_PAGESIZE);
    int8_t *addr = d->codes + (size_t)first * d->slot_code_bytes;
    size_t len = (size_t)n * d->slot_code_bytes;
    if (page <= 0 || (uintptr_t)addr % (size_t)page || len % (size_t)page || offset % (uint64_t)page)
        return moex_errorf("%s: slots of %zu bytes at file offset %llu are not page-aligned", name, d->slot_code_bytes,
                           (unsigned long long)offset),
               DEV_E_ARG;
    if (mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)offset) == MAP_FAILED) {
        int err = errno;
        /* A failed MAP_FIXED may leave the range unmapped: put fresh memory
         * back, or give up the slots from `first` on. */
        if (mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            d->n_slots = first;
        return moex_errorf("%s: mapping %zu bytes of slots from a file: %s", name, len, strerror(err)), DEV_E_DEVMEM;
    }
#if defined(MADV_WILLNEED)
    madvise(addr, len, MADV_WILLNEED); /* read-ahead when the file is not cached; advice only */
#endif
    d->counters.imported_bytes += len;
    return DEV_OK;
}

int dev_slot_view(struct dev *d, int slot, dev_slot_fn fn, void *user) {
    if (!d || !fn) return moex_errorf("dev_slot_view: no device or function"), DEV_E_ARG;
    if (!d->slots || slot < 0 || slot >= d->n_slots)
        return moex_errorf("%s: slot %d of %d", d->caps.name, slot, d->n_slots), DEV_E_ARG;
    if (d->slots[slot].N == 0) return moex_errorf("%s: slot %d is empty", d->caps.name, slot), DEV_E_STATE;
    dev_stream_drain(d);
    const struct dev_slot *s = &d->slots[slot];
    if (d->ops->mem_read) { /* memory the host cannot address: through a host copy */
        uint64_t bytes = d->ops->slot_used_bytes ? d->ops->slot_used_bytes(d, slot) : pack_bytes(d->layout, s->K, s->N);
        int8_t *codes = malloc((size_t)bytes);
        float *scales = calloc((size_t)s->N, sizeof(float)); /* a block device's slots have none: zeros */
        int rc = codes && scales ? DEV_OK : (moex_errorf("%s: out of memory", d->caps.name), DEV_E_NOMEM);
        if (rc == DEV_OK) rc = dev_mem_get(d, codes, dev_slot_codes(d, slot), bytes);
        if (rc == DEV_OK && d->scales)
            rc = dev_mem_get(d, scales, (const int8_t *)dev_slot_scales(d, slot), (uint64_t)s->N * sizeof(float));
        if (rc == DEV_OK) rc = fn(user, codes, (size_t)bytes, scales, s->K, s->N);
        free(codes);
        free(scales);
        return rc;
    }
    dev_mem_open(d);
    int rc = fn(user, dev_slot_codes(d, slot), pack_bytes(d->layout, s->K, s->N), dev_slot_scales(d, slot), s->K, s->N);
    dev_mem_close(d);
    return rc;
}
