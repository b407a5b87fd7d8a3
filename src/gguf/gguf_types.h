/* Private to src/gguf: the block layout of every tensor type id a GGUF file
 * may carry (ggml's ids), so that files can be validated and described even
 * for types moex cannot compute with. */
#ifndef MOEX_GGUF_TYPES_H
#define MOEX_GGUF_TYPES_H

#include <stdint.h>

struct gguf_type_desc {
    const char *name;
    int block_size; /* values per block; 0 for an id that was removed from GGUF */
    int type_size;  /* bytes per block */
};

/* NULL for an id never assigned. A removed id has a name and block_size 0. */
const struct gguf_type_desc *gguf_type_desc(uint32_t type);

#endif
