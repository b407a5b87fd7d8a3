/* Loading a model for the public API: the file, its worker threads, the
 * device options every context of it gets, and the pack file found next to
 * the model. */
#include "api/api_impl.h"

#include "arch/arch.h"
#include "core/threadpool.h"
#include "dev/dev.h"
#include "dev/sim.h"
#include "gguf/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *moex_version(void) { return MOEX_VERSION; }

const char *moex_last_error(void) { return moex_error(); }

int api_null(const char *function, const char *name) { return moex_errorf("%s: %s is NULL", function, name); }

void moex_log(const moex_model *m, enum moex_log_level level, const char *fmt, ...) {
    if (!m->log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->log(m->user, level, msg);
}

void moex_model_params_default(struct moex_model_params *p) {
    API_CHECK_VOID(p);
    memset(p, 0, sizeof *p);
    p->pin_threads = true;
    p->device.device = "none";
    p->device.hot_fraction = 1.0;
}

static int dup_opt(const char *s, char **out) {
    *out = NULL;
    if (!s) return 0;
    if (!(*out = strdup(s))) return moex_errorf("out of memory");
    return 0;
}

int moex_pack_path_for(const char *model_path, char *out, size_t size) {
    API_CHECK(model_path, -1);
    API_CHECK(out, -1);
    size_t n = strlen(model_path);
    if (n >= 5 && !strcmp(model_path + n - 5, ".gguf")) n -= 5;
    if (n + 6 > size) return moex_errorf("the model path is too long");
    memcpy(out, model_path, n);
    memcpy(out + n, ".mxpk", 6);
    return 0;
}

/* MODEL.mxpk next to the model, when that file exists. */
static int find_pack(const char *model_path, char **out) {
    *out = NULL;
    size_t size = strlen(model_path) + 6;
    char *p = malloc(size);
    if (!p) return moex_errorf("out of memory");
    struct stat st;
    if (moex_pack_path_for(model_path, p, size) == 0 && stat(p, &st) == 0) *out = p;
    else free(p);
    return 0;
}

static moex_model *load_vocab(const struct moex_model_params *p) {
    moex_model *m = calloc(1, sizeof *m);
    if (!m) return moex_errorf("out of memory"), NULL;
    m->log = p->log;
    m->progress = p->progress;
    m->user = p->user;
    if (dup_opt(p->path, &m->path) || !(m->model = model_load_vocab(p->path))) {
        moex_model_free(m);
        return NULL;
    }
    return m;
}

static const char *device_name(const char *d) { return d && *d ? d : "none"; }

moex_model *moex_model_load(const struct moex_model_params *p) {
    API_CHECK(p, NULL);
    if (!p->path) return moex_errorf("moex_model_load: no model path"), NULL;
    if (p->vocab_only) return load_vocab(p);
    const struct moex_device_params *d = &p->device;
    const struct dev_name_info *info = dev_name_info(device_name(d->device));
    if (!info) return moex_errorf("device '%s' is not one of %s", d->device, dev_names()), NULL;
    const char *device = info->name;
    if (!(d->hot_fraction >= 0 && d->hot_fraction <= 1))
        return moex_errorf("hot_fraction %g is not a share in 0..1 (0: hot_budget in bytes)", d->hot_fraction), NULL;
    moex_model *m = calloc(1, sizeof *m);
    if (!m) return moex_errorf("out of memory"), NULL;
    m->log = p->log;
    m->progress = p->progress;
    m->user = p->user;
    if (dup_opt(p->path, &m->path) || dup_opt(d->stats_path, &m->stats_path) ||
        dup_opt(d->sim_figures, &m->sim_figures))
        goto fail;
    bool on_device = info->offloads;
    /* A pack file serves the device's experts and the CPU's interleaved layout. */
    if (!d->no_pack && (d->pack_path ? dup_opt(d->pack_path, &m->pack_path) : find_pack(p->path, &m->pack_path)))
        goto fail;
    struct moe_exec_options *e = &m->experts;
    e->device = device;
    e->hot_budget = d->hot_budget;
    e->hot_fraction = d->hot_fraction;
    e->min_m = d->min_m;
    e->stats_path = m->stats_path;
    e->pinned_share = -1;
    e->no_overlap = d->no_overlap;
    e->adaptive = d->adaptive;
    e->device_spec = m->sim_figures;
    e->pack_path = on_device ? m->pack_path : NULL;
    e->no_backbone = d->no_backbone;
    e->adaptive = d->adaptive;
    if (!(m->model = model_load(p->path))) goto fail;
    m->model->plain_rows = p->no_interleave;
    if (!(m->pool = threadpool_new(p->n_threads, p->pin_threads))) goto fail;
    m->counted = true;
    api_model_loaded(1);
    return m;
fail:
    moex_model_free(m);
    return NULL;
}

void moex_model_free(moex_model *m) {
    if (!m) return;
    bool counted = m->counted;
    threadpool_free(m->pool);
    model_free(m->model);
    api_grammar_vocab_free(m);
    free(m->path);
    free(m->stats_path);
    free(m->sim_figures);
    free(m->pack_path);
    free(m);
    if (counted) api_model_loaded(-1); /* the kernels are no longer in use by it */
}

const char *moex_model_name(const moex_model *m) {
    API_CHECK(m, NULL);
    return m->model->name;
}

const char *moex_model_arch(const moex_model *m) {
    API_CHECK(m, NULL);
    return m->model->arch ? m->model->arch->name : "";
}

int moex_model_n_vocab(const moex_model *m) {
    API_CHECK(m, -1);
    return m->model->hp.n_vocab;
}

int moex_model_n_ctx_train(const moex_model *m) {
    API_CHECK(m, -1);
    return m->model->hp.n_ctx_train;
}

uint64_t moex_model_n_params(const moex_model *m) {
    API_CHECK(m, 0);
    return m->model->n_params;
}

const char *moex_model_pack_path(const moex_model *m) {
    API_CHECK(m, NULL);
    return m->pack_path;
}

int moex_check_sim_figures(const char *spec) {
    struct sim_figures f;
    return sim_figures_parse(spec, &f);
}

FILE *api_text_open(struct api_text *t) {
    t->text = NULL;
    t->len = 0;
    t->out = open_memstream(&t->text, &t->len);
    if (!t->out) moex_errorf("out of memory");
    return t->out;
}

char *api_text_close(struct api_text *t, bool ok) {
    if (!t->out) return NULL;
    if (fclose(t->out) != 0 || !ok) {
        free(t->text);
        return moex_errorf("out of memory for a report"), NULL;
    }
    return t->text;
}

char *moex_file_info(const char *path, bool all_metadata) {
    API_CHECK(path, NULL);
    struct gguf_file *f = gguf_open(path);
    if (!f) return NULL;
    struct api_text t;
    FILE *out = api_text_open(&t);
    bool ok = out && gguf_print_info(out, f, all_metadata) == 0;
    gguf_close(f);
    return api_text_close(&t, ok);
}
