/* The architectures moex runs: one row each. */
#include "arch/arch.h"

#include <stdio.h>
#include <string.h>

extern const struct arch arch_qwen3moe;
extern const struct arch arch_qwen35moe;
extern const struct arch arch_lfm2moe;

static const struct arch *const archs[] = {
    &arch_qwen3moe,
    &arch_qwen35moe,
    &arch_lfm2moe,
};

int arch_count(void) { return (int)(sizeof archs / sizeof *archs); }

const struct arch *arch_at(int i) { return i >= 0 && i < arch_count() ? archs[i] : NULL; }

const struct arch *arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

void arch_names(char *out, int size) {
    int used = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof archs / sizeof *archs && used < size; i++)
        used += snprintf(out + used, (size_t)(size - used), "%s%s", i ? ", " : "", archs[i]->name);
}
