/* Device geometry from capabilities alone (dev.h): what slots, pools and
 * memory take, which types a block device takes, its slot type. A planner
 * reads these without a device; dev.c allocates by them. */
#include "dev/dev_impl.h"

#include "core/error.h"

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int dev_set_slot_type(struct dev *d, enum qtype slot_type) {
    if (!d) return moex_errorf("dev_set_slot_type: no device"), DEV_E_ARG;
    if (d->caps.compute != DEV_COMPUTE_BLOCKS)
        return moex_errorf("%s: slots hold W8A8 codes, not GGUF blocks", d->caps.name), DEV_E_ARG;
    if (d->slots || d->n_buffers) return moex_errorf("%s: the slot type is set before any allocation", d->caps.name), DEV_E_STATE;
    if (!dev_caps_takes(&d->caps, slot_type))
        return moex_errorf("%s: slots for %s weights", d->caps.name, quant_type_name(slot_type)), DEV_E_TYPE;
    d->slot_type = slot_type;
    d->caps.code_block_values = quant_traits(slot_type)->block_size;
    d->caps.code_block_bytes = (int)quant_traits(slot_type)->type_size;
    return DEV_OK;
}

bool dev_caps_takes(const struct dev_caps *c, enum qtype type) {
    if (c->compute != DEV_COMPUTE_BLOCKS) return true;
    return (unsigned)type < 64 && (c->block_types >> (unsigned)type & 1);
}

uint64_t dev_caps_slot_code_bytes(const struct dev_caps *c, int64_t slot_values) {
    uint64_t per = c->code_block_values > 0 ? (uint64_t)c->code_block_values : 1;
    uint64_t bytes = ((uint64_t)slot_values + per - 1) / per * (uint64_t)(c->code_block_bytes > 0 ? c->code_block_bytes : 1);
    return round_up((size_t)bytes, 64);
}

uint64_t dev_caps_mem_bytes(const struct dev_caps *c, uint64_t bytes) {
    uint64_t g = c->mem_granule ? c->mem_granule : 1;
    return (bytes + g - 1) / g * g;
}

uint64_t dev_scale_bytes(const struct dev_caps *c, int max_n) {
    return c->compute == DEV_COMPUTE_BLOCKS ? 0 : (uint64_t)max_n * sizeof(float);
}

uint64_t dev_caps_slot_bytes(const struct dev_caps *c, int64_t slot_values, int max_n) {
    if (slot_values <= 0 || max_n <= 0) return 0;
    return dev_caps_slot_code_bytes(c, slot_values) + round_up((size_t)dev_scale_bytes(c, max_n), 64);
}

uint64_t dev_caps_pool_bytes(const struct dev_caps *c, int n_slots, int64_t slot_values, int max_n) {
    if (n_slots <= 0 || slot_values <= 0 || max_n <= 0) return 0;
    return dev_caps_mem_bytes(c, dev_caps_slot_code_bytes(c, slot_values) * (uint64_t)n_slots) +
           dev_caps_mem_bytes(c, (uint64_t)n_slots * dev_scale_bytes(c, max_n));
}

uint64_t dev_caps_sized_pool_bytes(const struct dev_caps *c, uint64_t code_bytes) {
    return dev_caps_mem_bytes(c, code_bytes);
}

bool dev_caps_fits(const struct dev_caps *c, int64_t K, int64_t N) {
    return K > 0 && N > 0 && K % c->k_multiple == 0 && N % c->n_multiple == 0 && K <= c->k_max && N <= c->n_max;
}

/* No device: W8A8 slots, counted in bytes. */
static const struct dev_caps *caps_or_w8a8(const struct dev *d) {
    static const struct dev_caps w8a8 = { .compute = DEV_COMPUTE_W8A8, .mem_granule = 1, .code_block_values = 1,
                                          .code_block_bytes = 1 };
    return d ? &d->caps : &w8a8;
}

uint64_t dev_slot_bytes(const struct dev *d, int64_t slot_values, int max_n) {
    return dev_caps_slot_bytes(caps_or_w8a8(d), slot_values, max_n);
}

uint64_t dev_mem_bytes(const struct dev *d, uint64_t bytes) { return dev_caps_mem_bytes(caps_or_w8a8(d), bytes); }

uint64_t dev_pool_bytes(const struct dev *d, int n_slots, int64_t slot_values, int max_n) {
    return dev_caps_pool_bytes(caps_or_w8a8(d), n_slots, slot_values, max_n);
}
