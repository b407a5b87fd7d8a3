/* Against ggml itself: (1) dequantizing the first 16384 values of one tensor
 * of each type equals ggml's to_float bit for bit (oracle/dequant); (2) our
 * weight quantizers, run on the F32 models' tensors, write the same bytes
 * llama-quantize wrote into the quantized models (Q5_0 among them: the
 * fallback of Q4_K for rows of 128); (3) the 32-value types' tensors in
 * those files come back byte for byte through dequantize then quantize. */
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

/* Requantize every tensor of the quantized models from their F32 model;
 * counts per type into same / total. */
static void requantize_family(const char *f32_model, const char *const *models, int n_models, int *same_by_type,
                              int *total_by_type) {
    struct gguf_file *src = gguf_open(oracle_path(f32_model));
    CHECKF(src != NULL, "%s", moex_error());
    if (!src) return;
    for (int m = 0; m < n_models; m++) {
        struct gguf_file *g = gguf_open(oracle_path(models[m]));
        CHECKF(g != NULL, "%s", moex_error());
        if (!g) continue;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct gguf_tensor *t = &g->tensors[i];
            const struct gguf_tensor *f = gguf_find_tensor(src, t->name);
            if (!f || f->type != QT_F32 || t->type == QT_F32) continue;
            const struct qtype_traits *tr = quant_traits((enum qtype)t->type);
            CHECKF(tr && tr->from_float, "%s %s: type %s has no quantizer", models[m], t->name,
                   quant_type_name((enum qtype)t->type));
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
            total_by_type[t->type]++;
            same_by_type[t->type] += same;
            if (!same) fprintf(stderr, "%s %s (%s): bytes differ from llama-quantize\n", models[m], t->name, tr->name);
            free(q);
        }
        gguf_close(g);
    }
    gguf_close(src);
}

static void test_requantize(void) {
    static const char *o1[] = {"models/qwen3moe-o1-Q8_0.gguf", "models/qwen3moe-o1-Q4_0.gguf",
                               "models/qwen3moe-o1-Q4_K_M.gguf", "models/qwen3moe-o1-Q5_K_M.gguf",
                               "models/qwen3moe-o1-Q6_K.gguf"};
    static const char *o2[] = {"lfm2moe-o2/models/lfm2moe-o2-Q8_0.gguf", "lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf"};
    static const char *o3[] = {"qwen35moe-o3/models/qwen35moe-o3-Q8_0.gguf",
                               "qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf"};
    int same[QT_MAX] = {0}, total[QT_MAX] = {0};
    requantize_family("models/qwen3moe-o1-F32.gguf", o1, 5, same, total);
    requantize_family("lfm2moe-o2/models/lfm2moe-o2-F32.gguf", o2, 2, same, total);
    requantize_family("qwen35moe-o3/models/qwen35moe-o3-F32.gguf", o3, 2, same, total);
    for (int t = 0; t < QT_MAX; t++) {
        if (!total[t]) continue;
        printf("requantize %-5s: %d of %d tensors byte identical to llama-quantize\n", quant_type_name((enum qtype)t),
               same[t], total[t]);
        CHECK(same[t] == total[t]);
    }
    CHECKF(total[QT_Q5_0] >= 4, "qwen35moe-o3-Q4_K_M holds four Q5_0 tensors, %d compared", total[QT_Q5_0]);
}

/* For ggml's reference quantizers of the 32-value types, quantize(dequantize(x))
 * == x: the value of largest magnitude (Q4_0, Q5_0, Q8_0) or the min and max
 * (Q4_1, Q5_1) come back exactly, so d does, and each code is recovered far
 * from a rounding boundary. Checked on every such tensor of the file. */
static void test_dequant_requant(void) {
    const char *model = "qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf";
    struct gguf_file *g = gguf_open(oracle_path(model));
    CHECKF(g != NULL, "%s", moex_error());
    if (!g) return;
    int checked = 0, q5_0 = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct gguf_tensor *t = &g->tensors[i];
        enum qtype type = (enum qtype)t->type;
        if (type != QT_Q4_0 && type != QT_Q4_1 && type != QT_Q5_0 && type != QT_Q5_1 && type != QT_Q8_0) continue;
        const struct qtype_traits *tr = quant_traits(type);
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        size_t bytes = quant_row_size(type, n);
        CHECKF(bytes == t->nbytes, "%s %s: %zu bytes", model, t->name, bytes);
        if (bytes != t->nbytes) continue;
        float *x = malloc((size_t)n * sizeof *x);
        void *q = malloc(bytes);
        tr->to_float(t->data, x, n);
        tr->from_float(x, q, n);
        int same = memcmp(q, t->data, bytes) == 0;
        CHECKF(same, "%s %s (%s): dequantize then quantize changes the bytes", model, t->name, tr->name);
        checked++;
        q5_0 += type == QT_Q5_0;
        free(x);
        free(q);
    }
    printf("dequantize + quantize: %d tensors of %s byte identical (%d Q5_0)\n", checked, model, q5_0);
    CHECK(q5_0 >= 4 && gguf_find_tensor(g, "blk.0.ffn_down_exps.weight") &&
          gguf_find_tensor(g, "blk.0.ffn_down_exps.weight")->type == QT_Q5_0);
    gguf_close(g);
}

int main(void) {
    test_dequant_manifest();
    test_requantize();
    test_dequant_requant();
    return test_finish();
}
