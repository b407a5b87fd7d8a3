/* First fit over a sorted array of free ranges; live allocations in a
 * sorted array for release. Windows hold thousands of buffers, so linear
 * scans are fast enough and keep the code obvious. */
#include "dev/iova.h"

#include <stdlib.h>
#include <string.h>

struct range {
    uint64_t start, len;
};

struct ranges {
    struct range *v;
    size_t n, cap;
};

struct iova_space {
    uint64_t size, align;
    bool reuse;
    struct ranges free_list; /* sorted by start, never adjacent */
    struct ranges live;      /* sorted by start */
    uint64_t used;
};

static int ranges_insert(struct ranges *r, size_t at, struct range x) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        struct range *v = realloc(r->v, cap * sizeof *v);
        if (!v) return -1;
        r->v = v;
        r->cap = cap;
    }
    memmove(&r->v[at + 1], &r->v[at], (r->n - at) * sizeof *r->v);
    r->v[at] = x;
    r->n++;
    return 0;
}

static void ranges_remove(struct ranges *r, size_t at) {
    memmove(&r->v[at], &r->v[at + 1], (r->n - at - 1) * sizeof *r->v);
    r->n--;
}

/* First index whose start is >= addr. */
static size_t ranges_lower_bound(const struct ranges *r, uint64_t addr) {
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->v[mid].start < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

struct iova_space *iova_new(uint64_t size, uint64_t align, bool reuse) {
    if (align == 0 || (align & (align - 1)) || size < align) return NULL;
    struct iova_space *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->size = size / align * align;
    s->align = align;
    s->reuse = reuse;
    if (ranges_insert(&s->free_list, 0, (struct range){0, s->size}) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void iova_delete(struct iova_space *s) {
    if (!s) return;
    free(s->free_list.v);
    free(s->live.v);
    free(s);
}

int iova_alloc(struct iova_space *s, uint64_t bytes, uint64_t *addr) {
    if (bytes == 0 || bytes > s->size) return -1;
    const uint64_t len = (bytes + s->align - 1) / s->align * s->align;
    for (size_t i = 0; i < s->free_list.n; i++) {
        struct range f = s->free_list.v[i];
        if (f.len < len) continue;
        /* Ranges start aligned and have aligned lengths, so no padding. */
        size_t at = ranges_lower_bound(&s->live, f.start);
        if (ranges_insert(&s->live, at, (struct range){f.start, len}) != 0) return -1;
        if (f.len == len) ranges_remove(&s->free_list, i);
        else s->free_list.v[i] = (struct range){f.start + len, f.len - len};
        s->used += len;
        *addr = f.start;
        return 0;
    }
    return -1;
}

int iova_release(struct iova_space *s, uint64_t addr) {
    size_t at = ranges_lower_bound(&s->live, addr);
    if (at == s->live.n || s->live.v[at].start != addr) return -1;
    struct range r = s->live.v[at];
    ranges_remove(&s->live, at);
    s->used -= r.len;
    if (!s->reuse) return 0;
    /* Back into the free list, merged with its neighbours. */
    size_t i = ranges_lower_bound(&s->free_list, r.start);
    bool merge_prev = i > 0 && s->free_list.v[i - 1].start + s->free_list.v[i - 1].len == r.start;
    bool merge_next = i < s->free_list.n && r.start + r.len == s->free_list.v[i].start;
    if (merge_prev && merge_next) {
        s->free_list.v[i - 1].len += r.len + s->free_list.v[i].len;
        ranges_remove(&s->free_list, i);
    } else if (merge_prev) {
        s->free_list.v[i - 1].len += r.len;
    } else if (merge_next) {
        s->free_list.v[i].start = r.start;
        s->free_list.v[i].len += r.len;
    } else if (ranges_insert(&s->free_list, i, r) != 0) {
        return 0; /* out of memory: the range is lost, as if never reused */
    }
    return 0;
}

uint64_t iova_used(const struct iova_space *s) { return s->used; }
uint64_t iova_count(const struct iova_space *s) { return s->live.n; }

uint64_t iova_largest_free(const struct iova_space *s) {
    uint64_t m = 0;
    for (size_t i = 0; i < s->free_list.n; i++)
        if (s->free_list.v[i].len > m) m = s->free_list.v[i].len;
    return m;
}
