/* The process-wide choice of CPU kernels for the public API: one kernel
 * table serves every model, so it changes only while no model is loaded. */
#include "api/api_impl.h"

#include "quant/quant.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int models_loaded;

int moex_set_isa(const char *isa) {
    enum isa cap = ISA_COUNT;
    if (isa && *isa && isa_from_name(isa, &cap))
        return moex_errorf("ISA '%s' is not one of scalar, avx2, avx512, neon", isa);
    pthread_mutex_lock(&lock);
    int loaded = models_loaded;
    if (!loaded) quant_init(cap);
    pthread_mutex_unlock(&lock);
    if (loaded) return moex_errorf("the ISA is chosen for the whole process: set it before loading models (%d loaded)", loaded);
    return 0;
}

const char *moex_isa(void) {
    pthread_mutex_lock(&lock);
    const char *name = isa_name(quant_active_isa()); /* selects the default kernels on first use */
    pthread_mutex_unlock(&lock);
    return name;
}

void api_model_loaded(int delta) {
    pthread_mutex_lock(&lock);
    models_loaded += delta;
    pthread_mutex_unlock(&lock);
}
