/* Against ggml itself: (1) dequantizing the first 16384 values of one tensor
 * of each type equals ggml's to_float bit for bit (oracle/dequant); (2) our
 * weight quantizers, run on the F32 model's tensors, write the same bytes
 * llama-quantize wrote into the quantized models. */
#include "harness.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

/* The manifest is a small flat JSON array of objects with string and number
 * values; this reads the value of "key" after position *pos. */
static int json_field(const char *json, const char *obj_end, const char *key, char *out, size_t out_size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *p = strstr(json, pattern);
    if (!p || p > obj_end) return -1;
    p = strchr(p + strlen(pattern), ':');
    if (!p) return -1;
    p++;
    while (*p == ' ' || *p == '\n') p++;
    size_t n = 0;
    if (*p == '"') {
        p++;
        while (*p && *p != '"' && n + 1 < out_size) out[n++] = *p++;
    } else {
        while (*p && *p != ',' && *p != '\n' && *p != '}' && n + 1 < out_size) out[n++] = *p++;
    }
    out[n] = 0;
    return 0;
}

static void test_dequant_manifest(void) {
    size_t size;
    char *json = read_whole_file(oracle_path("dequant/manifest.json"), &size);
    CHECK(json != NULL);
    if (!json) return;
    int entries = 0;
    for (const char *obj = strchr(json, '{'); obj; obj = strchr(obj + 1, '{')) {
        const char *end = strchr(obj, '}');
        if (!end) break;
        char model[256], tensor[256], type[32], nvals[32], file[256];
        if (json_field(obj, end, "model", model, sizeof model) || json_field(obj, end, "tensor", tensor, sizeof tensor) ||
            json_field(obj, end, "type", type, sizeof type) || json_field(obj, end, "n_values", nvals, sizeof nvals) ||
            json_field(obj, end, "file", file, sizeof file)) {
            CHECKF(0, "manifest entry %d unreadable", entries);
            continue;
        }
        entries++;
        int64_t n = atoll(nvals);
        struct gguf_file *g = gguf_open(oracle_path(model));
        CHECKF(g != NULL, "%s: %s", model, moex_error());
        if (!g) continue;
        const struct gguf_tensor *t = gguf_find_tensor(g, tensor);
        CHECKF(t != NULL, "%s has no %s", model, tensor);
        size_t ref_size = 0;
        float *ref = read_whole_file(oracle_path(file), &ref_size);
        const struct qtype_traits *tr = t ? quant_traits((enum qtype)t->type) : NULL;
        CHECKF(tr && strcmp(tr->name, type) == 0, "%s %s: type %s", model, tensor, t ? quant_type_name((enum qtype)t->type) : "?");
        if (t && tr && ref && ref_size == (size_t)n * sizeof(float) && quant_row_size((enum qtype)t->type, n) <= t->nbytes) {
            float *got = malloc((size_t)n * sizeof(float));
            tr->to_float(t->data, got, n);
            int same = memcmp(got, ref, (size_t)n * sizeof(float)) == 0;
            CHECKF(same, "%s %s (%s): dequantization differs from ggml", model, tensor, type);
            if (!same) {
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(&got[i], &ref[i], 4)) {
                        fprintf(stderr, "  first difference at %lld: %.9g vs %.9g\n", (long long)i, got[i], ref[i]);
                        break;
                    }
            }
            printf("%-40s %-28s %-5s %s\n", model, tensor, type, same ? "bit exact" : "DIFFERS");
            free(got);
        } else {
            CHECKF(0, "%s %s: reference %s missing or of the wrong size", model, tensor, file);
        }
        free(ref);
        gguf_close(g);
    }
    CHECK(entries >= 10);
    free(json);
}

/* Requantize every tensor of the quantized models from the F32 model. */
static void test_requantize(void) {
    static const char *models[] = {"models/qwen3moe-o1-Q8_0.gguf", "models/qwen3moe-o1-Q4_0.gguf",
                                   "models/qwen3moe-o1-Q4_K_M.gguf", "models/qwen3moe-o1-Q5_K_M.gguf",
                                   "models/qwen3moe-o1-Q6_K.gguf"};
    struct gguf_file *src = gguf_open(oracle_path("models/qwen3moe-o1-F32.gguf"));
    CHECKF(src != NULL, "%s", moex_error());
    if (!src) return;
    int by_type_same[QT_MAX] = {0}, by_type_total[QT_MAX] = {0};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        struct gguf_file *g = gguf_open(oracle_path(models[m]));
        CHECKF(g != NULL, "%s", moex_error());
        if (!g) continue;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct gguf_tensor *t = &g->tensors[i];
            const struct gguf_tensor *f = gguf_find_tensor(src, t->name);
            if (!f || f->type != QT_F32 || t->type == QT_F32) continue;
            const struct qtype_traits *tr = quant_traits((enum qtype)t->type);
            if (!tr || !tr->from_float) continue;
            int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            size_t bytes = quant_row_size((enum qtype)t->type, n);
            if (!bytes || bytes != t->nbytes || f->nbytes != (uint64_t)n * 4) continue;
            void *q = malloc(bytes);
            /* row by row, as llama-quantize does */
            int64_t row = t->ne[0];
            size_t row_bytes = quant_row_size((enum qtype)t->type, row);
            for (int64_t r = 0; r < n / row; r++)
                tr->from_float((const float *)f->data + r * row, (char *)q + r * row_bytes, row);
            int same = memcmp(q, t->data, bytes) == 0;
            by_type_total[t->type]++;
            by_type_same[t->type] += same;
            if (!same) fprintf(stderr, "%s %s (%s): bytes differ from llama-quantize\n", models[m], t->name, tr->name);
            free(q);
        }
        gguf_close(g);
    }
    for (int t = 0; t < QT_MAX; t++) {
        if (!by_type_total[t]) continue;
        printf("requantize %-5s: %d of %d tensors byte identical to llama-quantize\n", quant_type_name((enum qtype)t),
               by_type_same[t], by_type_total[t]);
        CHECK(by_type_same[t] == by_type_total[t]);
    }
    gguf_close(src);
}

int main(void) {
    test_dequant_manifest();
    test_requantize();
    return test_finish();
}
