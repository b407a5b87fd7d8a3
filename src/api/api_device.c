/* The device table for the public API (dev/dev.h keeps it). */
#include "api/api_impl.h"

#include "dev/dev.h"

const char *moex_device_names(void) { return dev_names(); }

int moex_device_describe(const char *name, struct moex_device_desc *out) {
    API_CHECK(name, -1);
    API_CHECK(out, -1);
    const struct dev_name_info *info = dev_name_info(name);
    if (!info) return moex_errorf("device '%s' is not one of %s", name, dev_names());
    *out = (struct moex_device_desc){ info->name, info->summary, info->offloads, info->takes_spec, info->spec_option };
    return 0;
}
