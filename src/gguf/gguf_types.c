#include "gguf/gguf.h"
#include "gguf/gguf_types.h"

/* ggml's type table as GGUF files use it. Ids 4-5 (Q4_2, Q4_3), 31-33 and
 * 36-38 (interleaved repacks) were dropped from the format: files naming
 * them are refused by ggml as well. */
static const struct gguf_type_desc type_table[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},     [3] = {"Q4_1", 32, 20},
    [4] = {"Q4_2", 0, 0},       [5] = {"Q4_3", 0, 0},
    [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 36},
    [10] = {"Q2_K", 256, 84},   [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},  [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},        [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},       [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},      [31] = {"Q4_0_4_4", 0, 0},
    [32] = {"Q4_0_4_8", 0, 0},  [33] = {"Q4_0_8_8", 0, 0},
    [34] = {"TQ1_0", 256, 54},  [35] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0}, [37] = {"IQ4_NL_4_8", 0, 0},
    [38] = {"IQ4_NL_8_8", 0, 0}, [39] = {"MXFP4", 32, 17},
};

const struct gguf_type_desc *gguf_type_desc(uint32_t type) {
    if (type >= sizeof type_table / sizeof type_table[0]) return NULL;
    return &type_table[type];
}

const char *gguf_type_name(uint32_t type) {
    const struct gguf_type_desc *d = gguf_type_desc(type);
    return d ? d->name : "?";
}

size_t gguf_vtype_size(enum gguf_vtype t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

const char *gguf_vtype_name(enum gguf_vtype t) {
    static const char *const names[GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_VTYPE_COUNT ? names[t] : "?";
}
