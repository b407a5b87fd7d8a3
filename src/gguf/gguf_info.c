/* `moex info`: a readable description of a GGUF file. Long arrays and
 * strings are abbreviated the way gguf-dump does it (first items, then the
 * count) unless the caller asks for everything. */
#include "gguf/gguf.h"
#include "gguf/gguf_types.h"

#include <inttypes.h>
#include <string.h>

#define SHORT_ARRAY_ITEMS 8
#define SHORT_STRING_CHARS 60

/* Prints s quoted, escaping what a terminal would not show as itself. */
static void print_str(FILE *out, const char *s, uint64_t len, bool all) {
    uint64_t shown = len;
    if (!all && shown > SHORT_STRING_CHARS) shown = SHORT_STRING_CHARS;
    fputc('"', out);
    for (uint64_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
            else fputc(c, out);
        }
    }
    fputc('"', out);
    if (shown < len) fprintf(out, "... (%" PRIu64 " bytes)", len);
}

/* One element of a fixed-size array, read without assuming alignment. */
static void print_elem(FILE *out, enum gguf_vtype t, const uint8_t *p) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, gguf_vtype_size(t));
    switch (t) {
    case GGUF_U8: fprintf(out, "%u", v.u8); break;
    case GGUF_I8: fprintf(out, "%d", v.i8); break;
    case GGUF_U16: fprintf(out, "%u", v.u16); break;
    case GGUF_I16: fprintf(out, "%d", v.i16); break;
    case GGUF_U32: fprintf(out, "%" PRIu32, v.u32); break;
    case GGUF_I32: fprintf(out, "%" PRId32, v.i32); break;
    case GGUF_F32: fprintf(out, "%.9g", v.f32); break;
    case GGUF_BOOL: fputs(v.u8 ? "true" : "false", out); break;
    case GGUF_U64: fprintf(out, "%" PRIu64, v.u64); break;
    case GGUF_I64: fprintf(out, "%" PRId64, v.i64); break;
    case GGUF_F64: fprintf(out, "%.17g", v.f64); break;
    default: fputc('?', out);
    }
}

static void print_value(FILE *out, const struct gguf_kv *kv, bool all) {
    switch (kv->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        fprintf(out, "%" PRIu64, kv->v.u64);
        break;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64:
        fprintf(out, "%" PRId64, kv->v.i64);
        break;
    case GGUF_F32: fprintf(out, "%.9g", kv->v.f64); break;
    case GGUF_F64: fprintf(out, "%.17g", kv->v.f64); break;
    case GGUF_BOOL: fputs(kv->v.b ? "true" : "false", out); break;
    case GGUF_STRING: print_str(out, kv->v.str.data, kv->v.str.len, all); break;
    case GGUF_ARRAY: {
        uint64_t shown = kv->array_len;
        if (!all && shown > SHORT_ARRAY_ITEMS) shown = SHORT_ARRAY_ITEMS;
        size_t elem = gguf_vtype_size(kv->array_type);
        fputc('[', out);
        for (uint64_t i = 0; i < shown; i++) {
            if (i) fputs(", ", out);
            if (kv->array_type == GGUF_STRING)
                print_str(out, kv->array_strs[i].data, kv->array_strs[i].len, all);
            else
                print_elem(out, kv->array_type, (const uint8_t *)kv->array_data + i * elem);
        }
        if (shown < kv->array_len) fprintf(out, ", ... (%" PRIu64 " items)", kv->array_len);
        fputc(']', out);
        break;
    }
    default: fputc('?', out);
    }
}

static void print_type(FILE *out, const struct gguf_kv *kv) {
    char name[32];
    if (kv->type == GGUF_ARRAY)
        snprintf(name, sizeof name, "arr[%s,%" PRIu64 "]", gguf_vtype_name(kv->array_type), kv->array_len);
    else
        snprintf(name, sizeof name, "%s", gguf_vtype_name(kv->type));
    fprintf(out, "%-18s", name);
}

/* llama.cpp's general.file_type values for the common whole-model types. */
static const char *file_type_name(uint64_t ft) {
    switch (ft) {
    case 0: return "all F32";
    case 1: return "mostly F16";
    case 2: return "mostly Q4_0";
    case 3: return "mostly Q4_1";
    case 7: return "mostly Q8_0";
    case 8: return "mostly Q5_0";
    case 9: return "mostly Q5_1";
    case 10: return "mostly Q2_K";
    case 11: return "mostly Q3_K_S";
    case 12: return "mostly Q3_K_M";
    case 13: return "mostly Q3_K_L";
    case 14: return "mostly Q4_K_S";
    case 15: return "mostly Q4_K_M";
    case 16: return "mostly Q5_K_S";
    case 17: return "mostly Q5_K_M";
    case 18: return "mostly Q6_K";
    case 32: return "mostly BF16";
    default: return NULL;
    }
}

/* Per-architecture keys worth showing first, as suffixes of "<arch>.". */
static const char *const hparam_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "expert_feed_forward_length", "expert_shared_feed_forward_length",
    "expert_count", "expert_used_count", "expert_shared_count",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon",
    "rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "vocab_size",
};

static void print_summary(FILE *out, const struct gguf_file *f) {
    fprintf(out, "file:         %s\n", f->path);
    fprintf(out, "version:      %" PRIu32 "\n", f->version);
    fprintf(out, "size:         %" PRIu64 " bytes (%.2f MiB)\n", f->file_size, f->file_size / 1048576.0);
    fprintf(out, "alignment:    %" PRIu64 "\n", f->alignment);
    fprintf(out, "data offset:  %" PRIu64 "\n", f->data_offset);
    fprintf(out, "metadata:     %" PRIu64 " keys\n", f->n_kv);
    fprintf(out, "tensors:      %" PRIu64 "\n", f->n_tensors);

    const struct gguf_kv *name = gguf_find_kv(f, "general.name");
    if (name && name->type == GGUF_STRING) {
        fputs("name:         ", out);
        print_str(out, name->v.str.data, name->v.str.len, false);
        fputc('\n', out);
    }
    const struct gguf_kv *ft = gguf_find_kv(f, "general.file_type");
    if (ft && (ft->type == GGUF_U32 || ft->type == GGUF_U64)) {
        const char *ftn = file_type_name(ft->v.u64);
        fprintf(out, "file type:    %" PRIu64 "%s%s%s\n", ft->v.u64, ftn ? " (" : "", ftn ? ftn : "", ftn ? ")" : "");
    }
    const struct gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const struct gguf_kv *tok_model = gguf_find_kv(f, "tokenizer.ggml.model");
    if (tok_model && tok_model->type == GGUF_STRING) {
        fputs("tokenizer:    ", out);
        print_str(out, tok_model->v.str.data, tok_model->v.str.len, false);
        if (tokens && tokens->type == GGUF_ARRAY) fprintf(out, ", %" PRIu64 " tokens", tokens->array_len);
        fputc('\n', out);
    }

    const struct gguf_kv *arch = gguf_find_kv(f, "general.architecture");
    if (!arch || arch->type != GGUF_STRING) {
        fputs("architecture: (none)\n", out);
        return;
    }
    fputs("architecture: ", out);
    print_str(out, arch->v.str.data, arch->v.str.len, false);
    fputc('\n', out);
    if (arch->v.str.len > 64) return;
    for (size_t i = 0; i < sizeof hparam_keys / sizeof hparam_keys[0]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%.*s.%s", (int)arch->v.str.len, arch->v.str.data, hparam_keys[i]);
        const struct gguf_kv *kv = gguf_find_kv(f, key);
        if (!kv) continue;
        fprintf(out, "  %-38s ", hparam_keys[i]);
        print_value(out, kv, false);
        fputc('\n', out);
    }
}

static void print_metadata(FILE *out, const struct gguf_file *f, bool all) {
    fputs("\nmetadata:\n", out);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        fprintf(out, "  %4" PRIu64 " %-44s ", i, kv->key);
        print_type(out, kv);
        fputs(" = ", out);
        print_value(out, kv, all);
        fputc('\n', out);
    }
}

static int64_t tensor_elements(const struct gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static void print_tensors(FILE *out, const struct gguf_file *f) {
    fputs("\ntensors:\n", out);
    fprintf(out, "  %5s %-40s %-8s %-24s %12s %12s\n", "#", "name", "type", "shape", "bytes", "offset");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        char shape[96];
        int len = 0;
        for (int d = 0; d < t->n_dims && len < (int)sizeof shape; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%" PRId64, d ? " x " : "", t->ne[d]);
        fprintf(out, "  %5" PRIu64 " %-40s %-8s %-24s %12" PRIu64 " %12" PRIu64 "\n",
                i, t->name, gguf_type_name(t->type), shape, t->nbytes, t->offset);
    }

    /* Totals, and per type, in type id order. */
    uint64_t bytes = 0, params = 0;
    uint64_t type_count[64] = {0}, type_bytes[64] = {0}, type_params[64] = {0};
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        uint64_t n = (uint64_t)tensor_elements(t);
        bytes += t->nbytes;
        params += n;
        if (t->type < 64) {
            type_count[t->type]++;
            type_bytes[t->type] += t->nbytes;
            type_params[t->type] += n;
        }
    }
    fprintf(out, "\ntotals: %" PRIu64 " tensors, %" PRIu64 " bytes (%.2f MiB), %" PRIu64 " parameters",
            f->n_tensors, bytes, bytes / 1048576.0, params);
    if (params) fprintf(out, ", %.3f bits per parameter", 8.0 * (double)bytes / (double)params);
    fputc('\n', out);
    for (uint32_t t = 0; t < 64; t++) {
        if (!type_count[t]) continue;
        fprintf(out, "  %-8s %6" PRIu64 " tensors %14" PRIu64 " bytes %14" PRIu64 " parameters\n",
                gguf_type_name(t), type_count[t], type_bytes[t], type_params[t]);
    }
}

int gguf_print_info(FILE *out, const struct gguf_file *f, bool all_metadata) {
    print_summary(out, f);
    print_metadata(out, f, all_metadata);
    print_tensors(out, f);
    fflush(out);
    return ferror(out) ? -1 : 0;
}
