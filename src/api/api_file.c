/* Output files for the public API: moex_file is the library's atomic file
 * (src/core/atomic_file.h) under the public name. */
#include "api/api_impl.h"

#include "core/atomic_file.h"
#include "core/trace.h"

static struct atomic_file *inner(moex_file *f) { return (struct atomic_file *)f; }

moex_file *moex_file_create(const char *path) {
    API_CHECK(path, NULL);
    return (moex_file *)atomic_file_create(path);
}

int moex_file_write(moex_file *f, const void *data, size_t n) {
    API_CHECK(f, -1);
    if (!data && n) return api_null(__func__, "data"), -1;
    return atomic_file_write(inner(f), data, n);
}

int moex_file_commit(moex_file *f) {
    API_CHECK(f, -1);
    return atomic_file_commit(inner(f));
}

void moex_file_discard(moex_file *f) { atomic_file_discard(inner(f)); }
void moex_file_unlink_pending(void) { atomic_file_unlink_pending(); }

int moex_context_write_trace_file(const moex_context *c, moex_file *f) {
    API_CHECK(f, -1);
    if (!c) {
        atomic_file_discard(inner(f));
        return api_null(__func__, "c");
    }
    if (!c->trace) {
        atomic_file_discard(inner(f));
        return moex_errorf("the context records no timeline (moex_context_params.trace)");
    }
    return trace_write_file(c->trace, inner(f));
}
