/* Internal to src/pack: an open pack file (packfile_read.c opens and checks
 * it; packfile_access.c answers what it holds). */
#ifndef MOEX_PACKFILE_IMPL_H
#define MOEX_PACKFILE_IMPL_H

#include "core/error.h"
#include "pack/packfile.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct packfile {
    atomic_int refs;                 /* packfile_ref; the last packfile_close frees */
    char *path;
    int fd;                          /* -1 for a memory buffer */
    const uint8_t *map;
    uint64_t size;
    size_t map_len;                  /* nonzero when the mapping is ours */
    struct packfile_info info;
    int32_t *pinned;                 /* (n_pinned) */
    struct packfile_entry *entries;  /* (n_entries) */
    int32_t *by_weight;              /* (n_layers * n_expert * 3) entry or -1 */
    uint64_t data_checksum;
    struct packfile_host_entry *host; /* (info.n_host) by ascending source offset */
};

/* Says why a file is refused (moex_error: "NAME: ..."); returns status. */
int packfile_refuse(const char *name, int status, const char *fmt, ...) MOEX_PRINTF(3, 4);

#endif
