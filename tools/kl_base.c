#include "kl_base.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Header: magic, then n_ctx, n_vocab, n_chunk, top as u32; little-endian throughout. */
enum { HEADER_BYTES = 8 + 4 * 4 };

static size_t record_bytes(int top) { return 8 + 8 * (size_t)top; }

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_f32(unsigned char *p, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(p, u);
}

static float get_f32(const unsigned char *p) {
    uint32_t u = get_u32(p);
    float v;
    memcpy(&v, &u, 4);
    return v;
}

int kl_base_create(struct kl_base_writer *w, const char *path) {
    memset(w, 0, sizeof *w);
    w->path = path;
    if (!(w->f = moex_file_create(path))) return cli_fail("%s", moex_last_error()), -1;
    return 0;
}

int kl_base_begin(struct kl_base_writer *w, int n_ctx, int n_vocab, int n_chunk, int top, const int32_t *tokens) {
    w->n_vocab = n_vocab;
    w->top = top;
    w->ids = malloc(sizeof *w->ids * (size_t)top);
    w->vals = malloc(sizeof *w->vals * (size_t)top);
    w->in_top = calloc((size_t)n_vocab, 1);
    w->record = malloc(record_bytes(top));
    size_t n_tokens = (size_t)n_chunk * (size_t)n_ctx;
    unsigned char *head = malloc(HEADER_BYTES + 4 * n_tokens);
    if (!w->ids || !w->vals || !w->in_top || !w->record || !head) {
        free(head);
        return cli_fail("out of memory"), -1;
    }
    memcpy(head, KL_BASE_MAGIC, 8);
    put_u32(head + 8, (uint32_t)n_ctx);
    put_u32(head + 12, (uint32_t)n_vocab);
    put_u32(head + 16, (uint32_t)n_chunk);
    put_u32(head + 20, (uint32_t)top);
    for (size_t i = 0; i < n_tokens; i++) put_u32(head + HEADER_BYTES + 4 * i, (uint32_t)tokens[i]);
    int rc = moex_file_write(w->f, head, HEADER_BYTES + 4 * n_tokens);
    free(head);
    if (rc) return cli_fail("%s", moex_last_error()), -1;
    return 0;
}

int kl_base_put(struct kl_base_writer *w, const float *logits, float max_logit, double log_sum, float nll) {
    /* The top tokens by insertion into a sorted list: most logits fall below its last. */
    int n = 0, top = w->top;
    for (int i = 0; i < w->n_vocab; i++) {
        float v = logits[i];
        if (n == top && v <= w->vals[n - 1]) continue;
        int at = n < top ? n++ : n - 1;
        while (at > 0 && w->vals[at - 1] < v) {
            w->vals[at] = w->vals[at - 1];
            w->ids[at] = w->ids[at - 1];
            at--;
        }
        w->vals[at] = v;
        w->ids[at] = i;
    }
    for (int j = 0; j < top; j++) w->in_top[w->ids[j]] = 1;
    double rest = 0;
    for (int i = 0; i < w->n_vocab; i++)
        if (!w->in_top[i]) rest += exp((double)logits[i] - max_logit);
    for (int j = 0; j < top; j++) w->in_top[w->ids[j]] = 0;
    unsigned char *p = w->record;
    put_f32(p, nll);
    put_f32(p + 4, rest > 0 ? (float)(log(rest) - log_sum) : -INFINITY);
    for (int j = 0; j < top; j++) {
        put_u32(p + 8 + 8 * (size_t)j, (uint32_t)w->ids[j]);
        put_f32(p + 12 + 8 * (size_t)j, (float)(w->vals[j] - max_logit - log_sum));
    }
    if (moex_file_write(w->f, w->record, record_bytes(top))) return cli_fail("%s", moex_last_error()), -1;
    return 0;
}

int kl_base_commit(struct kl_base_writer *w) {
    moex_file *f = w->f;
    w->f = NULL;
    int rc = moex_file_commit(f) ? (cli_fail("%s", moex_last_error()), -1) : 0;
    kl_base_discard(w);
    return rc;
}

void kl_base_discard(struct kl_base_writer *w) {
    moex_file_discard(w->f);
    free(w->ids);
    free(w->vals);
    free(w->in_top);
    free(w->record);
    memset(w, 0, sizeof *w);
}

static int bad(struct kl_base_reader *r, const char *why) {
    cli_fail("--kl-divergence-base %s: %s", r->path, why);
    kl_base_close(r);
    return -1;
}

int kl_base_open(struct kl_base_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->path = path;
    unsigned char head[HEADER_BYTES];
    struct stat st;
    if (!(r->f = fopen(path, "rb"))) {
        cli_fail("--kl-divergence-base %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode)) return bad(r, "not a regular file");
    if (fread(head, 1, sizeof head, r->f) != sizeof head || memcmp(head, KL_BASE_MAGIC, 8))
        return bad(r, "not a base file of moex perplexity (wrong magic)");
    uint32_t n_ctx = get_u32(head + 8), n_vocab = get_u32(head + 12), n_chunk = get_u32(head + 16),
             top = get_u32(head + 20);
    if (n_ctx < 4 || n_ctx > 1 << 20 || n_vocab < 1 || n_vocab > 1 << 24 || n_chunk < 1 || n_chunk > 1 << 24 ||
        top < 1 || top > n_vocab)
        return bad(r, "the header's sizes are out of range");
    uint64_t n_tokens = (uint64_t)n_chunk * n_ctx, n_scored = (uint64_t)n_chunk * (n_ctx - 1 - n_ctx / 2);
    uint64_t expect = HEADER_BYTES + 4 * n_tokens + n_scored * record_bytes((int)top);
    if ((uint64_t)st.st_size != expect) return bad(r, "its size is not the one its header implies (truncated?)");
    r->n_ctx = (int)n_ctx;
    r->n_vocab = (int)n_vocab;
    r->n_chunk = (int)n_chunk;
    r->top = (int)top;
    r->tokens = malloc(sizeof *r->tokens * n_tokens);
    r->record = malloc(record_bytes(r->top));
    r->pos.ids = malloc(sizeof *r->pos.ids * top);
    r->pos.logp = malloc(sizeof *r->pos.logp * top);
    unsigned char *raw = malloc(4 * n_tokens);
    if (!r->tokens || !r->record || !r->pos.ids || !r->pos.logp || !raw) {
        free(raw);
        return bad(r, "out of memory");
    }
    size_t got = fread(raw, 4, n_tokens, r->f);
    for (size_t i = 0; i < got; i++) r->tokens[i] = (int32_t)get_u32(raw + 4 * i);
    free(raw);
    if (got != n_tokens) return bad(r, "cannot read its tokens");
    for (size_t i = 0; i < n_tokens; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= r->n_vocab) return bad(r, "holds a token id out of its vocabulary");
    return 0;
}

int kl_base_next(struct kl_base_reader *r, struct kl_base_pos *pos) {
    if (fread(r->record, 1, record_bytes(r->top), r->f) != record_bytes(r->top))
        return cli_fail("--kl-divergence-base %s: cannot read a position", r->path), -1;
    const unsigned char *p = r->record;
    r->pos.nll = get_f32(p);
    r->pos.log_rest = get_f32(p + 4);
    for (int j = 0; j < r->top; j++) {
        uint32_t id = get_u32(p + 8 + 8 * (size_t)j);
        float lp = get_f32(p + 12 + 8 * (size_t)j);
        if (id >= (uint32_t)r->n_vocab || !(lp <= 0) || isnan(r->pos.nll))
            return cli_fail("--kl-divergence-base %s: a position holds a bad token or probability", r->path), -1;
        r->pos.ids[j] = (int32_t)id;
        r->pos.logp[j] = lp;
    }
    *pos = r->pos;
    return 0;
}

void kl_base_close(struct kl_base_reader *r) {
    if (r->f) fclose(r->f);
    free(r->tokens);
    free(r->record);
    free(r->pos.ids);
    free(r->pos.logp);
    memset(r, 0, sizeof *r);
}
