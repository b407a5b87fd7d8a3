#include "moe/routing_stats.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "MOEXRST\0"
#define VERSION 2u
#define MAX_LAYERS 4096
#define MAX_EXPERTS 4096

static size_t le_count(const struct routing_stats *s) { return (size_t)s->n_layers * s->n_expert; }

struct routing_stats *routing_stats_new(int n_layers, int n_expert, int top_k, const char *model_name) {
    if (n_layers < 1 || n_layers > MAX_LAYERS || n_expert < 1 || n_expert > MAX_EXPERTS || top_k < 1 || top_k > n_expert) {
        moex_errorf("routing stats: bad sizes (%d layers, %d experts, top-%d)", n_layers, n_expert, top_k);
        return NULL;
    }
    struct routing_stats *s = calloc(1, sizeof *s);
    if (!s) { moex_errorf("routing stats: out of memory"); return NULL; }
    s->n_layers = n_layers;
    s->n_expert = n_expert;
    s->top_k = top_k;
    size_t le = le_count(s);
    s->counts = calloc(le, sizeof *s->counts);
    s->counts_first = calloc(le, sizeof *s->counts_first);
    s->weight_sums = calloc(le, sizeof *s->weight_sums);
    s->coact = calloc(le * (size_t)n_expert, sizeof *s->coact);
    s->next_total = calloc((size_t)n_layers, sizeof(uint64_t));
    s->next_hits = calloc((size_t)n_layers, sizeof(uint64_t));
    s->window_total = calloc((size_t)n_layers, sizeof(uint64_t));
    s->window_hits = calloc((size_t)n_layers, sizeof(uint64_t));
    s->history = calloc((size_t)n_layers * ROUTING_WINDOW * top_k, sizeof *s->history);
    s->seq_pos = calloc((size_t)n_layers, sizeof *s->seq_pos);
    s->model_name = strdup(model_name ? model_name : "");
    if (!s->counts || !s->counts_first || !s->weight_sums || !s->coact || !s->next_total || !s->next_hits ||
        !s->window_total || !s->window_hits || !s->history || !s->seq_pos || !s->model_name) {
        routing_stats_free(s);
        moex_errorf("routing stats: out of memory");
        return NULL;
    }
    return s;
}

void routing_stats_free(struct routing_stats *s) {
    if (!s) return;
    free(s->counts);
    free(s->counts_first);
    free(s->weight_sums);
    free(s->coact);
    free(s->next_total);
    free(s->next_hits);
    free(s->window_total);
    free(s->window_hits);
    free(s->history);
    free(s->seq_pos);
    free(s->model_name);
    free(s);
}

void routing_stats_begin_sequence(struct routing_stats *s) {
    memset(s->seq_pos, 0, (size_t)s->n_layers * sizeof *s->seq_pos);
    s->n_sequences++;
}

void routing_stats_set_phase(struct routing_stats *s, int phase) { s->phase = phase ? 1 : 0; }

static int in_list(const int32_t *list, int n, int32_t e) {
    for (int i = 0; i < n; i++)
        if (list[i] == e) return 1;
    return 0;
}

void routing_stats_observe(void *user, int layer, int n_tokens, int top_k, const int32_t *ids, const float *weights) {
    struct routing_stats *s = user;
    if (layer < 0 || layer >= s->n_layers || top_k != s->top_k) return;
    int E = s->n_expert, K = top_k;
    size_t base = (size_t)layer * E;
    int32_t *ring = s->history + (size_t)layer * ROUTING_WINDOW * K;
    for (int t = 0; t < n_tokens; t++) {
        const int32_t *cur = ids + (size_t)t * K;
        const float *w = weights ? weights + (size_t)t * K : NULL;
        uint64_t pos = s->seq_pos[layer];
        for (int k = 0; k < K; k++) {
            int32_t e = cur[k];
            if (e < 0 || e >= E) continue;
            s->counts[base + e]++;
            if (s->phase == 0) s->counts_first[base + e]++;
            if (w) s->weight_sums[base + e] += w[k];
            uint64_t *row = s->coact + (base + (size_t)e) * E;
            for (int j = 0; j < K; j++)
                if (cur[j] >= 0 && cur[j] < E) row[cur[j]]++;
            if (pos >= 1) {
                const int32_t *prev = ring + (size_t)((pos - 1) % ROUTING_WINDOW) * K;
                s->next_total[layer]++;
                s->next_hits[layer] += (uint64_t)in_list(prev, K, e);
            }
            if (pos >= ROUTING_WINDOW) {
                int hit = 0;
                for (int back = 1; back <= ROUTING_WINDOW && !hit; back++)
                    hit = in_list(ring + (size_t)((pos - (uint64_t)back) % ROUTING_WINDOW) * K, K, e);
                s->window_total[layer]++;
                s->window_hits[layer] += (uint64_t)hit;
            }
        }
        memcpy(ring + (size_t)(pos % ROUTING_WINDOW) * K, cur, (size_t)K * sizeof *cur);
        s->seq_pos[layer] = pos + 1;
        if (layer == 0) s->n_tokens++;
    }
}

/* ---- file ---- */

struct header {
    char magic[8];
    uint32_t version, n_layers, n_expert, top_k;
    uint64_t n_tokens, n_sequences;
    uint32_t name_len, reserved;
    uint64_t model_hash, model_size;
};

int routing_stats_write_file(const struct routing_stats *s, struct atomic_file *out) {
    FILE *f = atomic_file_stream(out);
    if (!f) {
        atomic_file_discard(out);
        return -1;
    }
    struct header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.n_layers = (uint32_t)s->n_layers;
    h.n_expert = (uint32_t)s->n_expert;
    h.top_k = (uint32_t)s->top_k;
    h.n_tokens = s->n_tokens;
    h.n_sequences = s->n_sequences;
    h.name_len = (uint32_t)strlen(s->model_name);
    h.model_hash = s->model_hash;
    h.model_size = s->model_size;
    size_t le = le_count(s), L = (size_t)s->n_layers;
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(s->model_name, 1, h.name_len, f) == h.name_len &&
             fwrite(s->counts, sizeof *s->counts, le, f) == le &&
             fwrite(s->counts_first, sizeof *s->counts_first, le, f) == le &&
             fwrite(s->weight_sums, sizeof *s->weight_sums, le, f) == le &&
             fwrite(s->next_total, sizeof(uint64_t), L, f) == L && fwrite(s->next_hits, sizeof(uint64_t), L, f) == L &&
             fwrite(s->window_total, sizeof(uint64_t), L, f) == L &&
             fwrite(s->window_hits, sizeof(uint64_t), L, f) == L &&
             fwrite(s->coact, sizeof *s->coact, le * (size_t)s->n_expert, f) == le * (size_t)s->n_expert;
    if (!ok) {
        moex_errorf("%s: write failed: %s", atomic_file_path(out), strerror(errno));
        atomic_file_discard(out);
        return -1;
    }
    return atomic_file_commit(out);
}

int routing_stats_write(const struct routing_stats *s, const char *path) {
    struct atomic_file *out = atomic_file_create(path);
    return out ? routing_stats_write_file(s, out) : -1;
}

static int read_exact(FILE *f, void *dst, size_t size, size_t n) { return n == 0 || fread(dst, size, n, f) == n; }

struct routing_stats *routing_stats_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { moex_errorf("%s: cannot open", path); return NULL; }
    struct header h;
    struct routing_stats *s = NULL;
    char *name = NULL;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, MAGIC, 8)) { moex_errorf("%s: not a moex routing stats file", path); goto fail; }
    if (h.version != VERSION) { moex_errorf("%s: stats format version %u, this moex reads %u", path, h.version, VERSION); goto fail; }
    if (h.n_layers < 1 || h.n_layers > MAX_LAYERS || h.n_expert < 1 || h.n_expert > MAX_EXPERTS || h.top_k < 1 ||
        h.top_k > h.n_expert || h.name_len > 4096) {
        moex_errorf("%s: bad sizes in the header", path);
        goto fail;
    }
    if (h.reserved != 0) { moex_errorf("%s: reserved header field is %u, not 0", path, h.reserved); goto fail; }
    /* The file must have exactly the size the header implies. */
    uint64_t le = (uint64_t)h.n_layers * h.n_expert;
    uint64_t expect = sizeof h + h.name_len + 8 * (3 * le + 4 * (uint64_t)h.n_layers + le * h.n_expert);
    if (fseek(f, 0, SEEK_END) != 0 || (uint64_t)ftell(f) != expect || fseek(f, (long)sizeof h, SEEK_SET) != 0) {
        moex_errorf("%s: truncated or oversized (expected %llu bytes)", path, (unsigned long long)expect);
        goto fail;
    }
    name = calloc(h.name_len + 1, 1);
    if (!name || !read_exact(f, name, 1, h.name_len)) { moex_errorf("%s: read failed", path); goto fail; }
    s = routing_stats_new((int)h.n_layers, (int)h.n_expert, (int)h.top_k, name);
    if (!s) goto fail;
    s->n_tokens = h.n_tokens;
    s->n_sequences = h.n_sequences;
    s->model_hash = h.model_hash;
    s->model_size = h.model_size;
    size_t L = h.n_layers;
    if (!read_exact(f, s->counts, 8, le) || !read_exact(f, s->counts_first, 8, le) || !read_exact(f, s->weight_sums, 8, le) ||
        !read_exact(f, s->next_total, 8, L) || !read_exact(f, s->next_hits, 8, L) || !read_exact(f, s->window_total, 8, L) ||
        !read_exact(f, s->window_hits, 8, L) || !read_exact(f, s->coact, 8, le * h.n_expert)) {
        moex_errorf("%s: read failed", path);
        goto fail;
    }
    for (size_t l = 0; l < L; l++)
        if (s->next_hits[l] > s->next_total[l] || s->window_hits[l] > s->window_total[l]) {
            moex_errorf("%s: layer %zu: more repeats than choices", path, l);
            goto fail;
        }
    for (size_t k = 0; k < le; k++)
        if (!isfinite(s->weight_sums[k]) || s->weight_sums[k] < 0 || s->counts_first[k] > s->counts[k]) {
            moex_errorf("%s: layer %llu expert %llu: %s", path, (unsigned long long)(k / h.n_expert),
                        (unsigned long long)(k % h.n_expert),
                        s->counts_first[k] > s->counts[k] ? "more first-half rows than rows" : "bad weight sum");
            goto fail;
        }
    /* A layer routes each token to at most top_k experts, so its rows are at
     * most n_tokens x top_k: larger counts are damage (and their sum could
     * wrap, turning shares and entropies into nonsense). */
    uint64_t most;
    if (__builtin_mul_overflow(h.n_tokens, (uint64_t)h.top_k, &most)) most = UINT64_MAX;
    for (size_t l = 0; l < L; l++) {
        uint64_t rows = 0;
        bool wrapped = false;
        for (uint32_t e = 0; e < h.n_expert && !wrapped; e++)
            wrapped = __builtin_add_overflow(rows, s->counts[l * h.n_expert + e], &rows);
        if (wrapped || rows > most) {
            moex_errorf("%s: layer %zu: more rows than %llu tokens x top-%u", path, l,
                        (unsigned long long)h.n_tokens, h.top_k);
            goto fail;
        }
    }
    free(name);
    fclose(f);
    return s;
fail:
    free(name);
    routing_stats_free(s);
    fclose(f);
    return NULL;
}

int routing_stats_check_model(const struct routing_stats *s, const char *path, uint64_t model_hash,
                              uint64_t model_size, int n_layers, int n_expert) {
    if (s->n_layers != n_layers || s->n_expert != n_expert)
        return moex_errorf("%s: statistics of %d layers x %d experts do not match the model (%d x %d)", path,
                           s->n_layers, s->n_expert, n_layers, n_expert);
    /* Expert numbers mean nothing across models, even of the same shape. */
    if (s->model_hash != model_hash || s->model_size != model_size)
        return moex_errorf("%s: statistics gathered on another model ('%s', %llu bytes); run moex profile on this "
                           "one", path, s->model_name, (unsigned long long)s->model_size);
    return 0;
}

/* ---- measures ---- */

int routing_top10_count(int n_expert) {
    int n = (int)lround(n_expert / 10.0);
    return n < 1 ? 1 : n;
}

static int cmp_desc_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

void routing_stats_summarize(const struct routing_stats *s, int layer, struct routing_layer_summary *out) {
    memset(out, 0, sizeof *out);
    int E = s->n_expert;
    const uint64_t *c = s->counts + (size_t)layer * E, *first = s->counts_first + (size_t)layer * E;
    uint64_t *sorted = malloc((size_t)E * sizeof *sorted);
    int32_t *order = malloc((size_t)E * sizeof *order);
    if (!sorted || !order) { free(sorted); free(order); return; }
    uint64_t total = 0, total_first = 0;
    for (int e = 0; e < E; e++) { sorted[e] = c[e]; total += c[e]; total_first += first[e]; }
    out->rows = total;
    if (total) {
        qsort(sorted, (size_t)E, sizeof *sorted, cmp_desc_u64);
        uint64_t top = 0;
        for (int i = 0; i < routing_top10_count(E); i++) top += sorted[i];
        out->top10_share = (double)top / total;
        for (int e = 0; e < E; e++)
            if (c[e]) { double p = (double)c[e] / total; out->entropy -= p * log2(p); }
        out->entropy_norm = E > 1 ? out->entropy / log2(E) : 1;
    }
    if (s->next_total[layer]) out->repeat_next = (double)s->next_hits[layer] / s->next_total[layer];
    if (s->window_total[layer]) out->repeat_window = (double)s->window_hits[layer] / s->window_total[layer];
    /* The first half's hot list: its top quarter of experts (Qwen3's "top 32 of 128"). */
    uint64_t second_total = total - total_first;
    if (total_first && second_total) {
        for (int e = 0; e < E; e++) order[e] = e;
        for (int i = 1; i < E; i++) { /* insertion sort by first-half count, descending; ties by id */
            int32_t x = order[i];
            int j = i;
            while (j > 0 && first[order[j - 1]] < first[x]) { order[j] = order[j - 1]; j--; }
            order[j] = x;
        }
        int hot = E / 4 > 0 ? E / 4 : 1;
        uint64_t own = 0, other = 0;
        for (int i = 0; i < hot; i++) { own += first[order[i]]; other += c[order[i]] - first[order[i]]; }
        out->hot_own = (double)own / total_first;
        out->hot_other = (double)other / second_total;
    }
    free(sorted);
    free(order);
}

void routing_zipf_shares(int n_expert, int top_k, double skew, double *share) {
    double cap = 0.98 / top_k;
    int n_capped = 0;
    for (;;) {
        double sum = 0;
        for (int r = n_capped; r < n_expert; r++) sum += pow(r + 1, -skew);
        double free_mass = 1.0 - n_capped * cap;
        for (int r = 0; r < n_expert; r++) share[r] = r < n_capped ? cap : free_mass * pow(r + 1, -skew) / sum;
        if (n_capped == n_expert || share[n_capped] <= cap) break;
        n_capped++;
    }
}

double routing_zipf_top10_share(int n_expert, int top_k, double skew) {
    double *share = malloc((size_t)n_expert * sizeof *share);
    if (!share) return NAN;
    routing_zipf_shares(n_expert, top_k, skew, share);
    double top = 0;
    for (int i = 0; i < routing_top10_count(n_expert); i++) top += share[i];
    free(share);
    return top;
}
