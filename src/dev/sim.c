/* The sim's clock, cost model, IOVA window and fault injection (sim.h). */
#include "dev/sim.h"

#include "dev/rknpu_gen.h"

#include "core/error.h"
#include "dev/dev.h"
#include "dev/iova.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#define MIB 1048576.0
/* A device address names its domain above the window's bits. */
#define DOMAIN_SHIFT 48
#define MAX_DOMAINS 64

struct sim {
    struct sim_figures f;
    double clock_ns;
    struct iova_space *window[MAX_DOMAINS]; /* one window per IOMMU domain */
    int n_domains;
    uint64_t creates, submits; /* attempts, for "fail the Nth" */
    uint64_t program_submits, program_tasks; /* SIM_PROGRAMS: what was priced */
    uint64_t rng;
};

struct sim *sim_new(const struct sim_figures *f) {
    struct sim *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->f = *f;
    s->n_domains = f->domains < 1 ? 1 : (int)f->domains;
    for (int i = 0; i < s->n_domains; i++)
        if (!(s->window[i] = iova_new((uint64_t)(f->iova_mib * MIB), (uint64_t)f->iova_align, f->iova_reuse != 0))) {
            sim_delete(s);
            return NULL;
        }
    s->rng = (uint64_t)f->fail_seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    return s;
}

void sim_delete(struct sim *s) {
    if (!s) return;
    for (int i = 0; i < s->n_domains; i++) iova_delete(s->window[i]);
    free(s);
}

const struct sim_figures *sim_get_figures(const struct sim *s) { return &s->f; }
uint64_t sim_clock_ns(const struct sim *s) { return (uint64_t)llround(s->clock_ns); }
void sim_advance(struct sim *s, double ns) {
    if (ns > 0) s->clock_ns += ns;
}

/* xorshift64*: a uniform double in [0, 1). */
static double next_uniform(struct sim *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}

/* The Nth attempt, or a random draw, fails. */
static bool inject(struct sim *s, uint64_t attempt, double nth) {
    if (nth >= 1 && (double)attempt == nth) return true;
    return s->f.fail_prob > 0 && next_uniform(s) < s->f.fail_prob;
}

double sim_create_ns(const struct sim *s, uint64_t bytes) {
    return 1e3 * (s->f.create_us + s->f.create_us_per_mib * (double)bytes / MIB);
}

double sim_destroy_ns(const struct sim *s, uint64_t bytes) {
    return 1e3 * (s->f.destroy_us + s->f.destroy_us_per_mib * (double)bytes / MIB);
}

int sim_buffer_create(struct sim *s, uint64_t bytes, uint64_t *addr) {
    uint64_t attempt = ++s->creates;
    if (inject(s, attempt, s->f.fail_alloc)) {
        moex_errorf("sim: buffer creation %llu failed (injected fault)", (unsigned long long)attempt);
        return DEV_E_DEVMEM;
    }
    if (s->f.max_buffers >= 1 && (double)sim_buffer_count(s) >= s->f.max_buffers) {
        moex_errorf("sim: %llu buffers are live, the device maps at most %g", (unsigned long long)sim_buffer_count(s),
                    s->f.max_buffers);
        return DEV_E_DEVMEM;
    }
    /* Best fit over the domains: the window whose largest free range fits
     * most tightly; within it, first fit. A buffer lies in one window. */
    int d = -1;
    uint64_t fit = UINT64_MAX;
    for (int w = 0; w < s->n_domains; w++) {
        uint64_t room = iova_largest_free(s->window[w]);
        if (room >= bytes && room < fit) { fit = room; d = w; }
    }
    if (d < 0 || iova_alloc(s->window[d], bytes, addr) != 0) {
        moex_errorf("sim: no %llu-byte range left in the %d window(s) of %g MiB (%llu bytes in %llu buffers, largest "
                    "free %llu in the last): Bad address",
                    (unsigned long long)bytes, s->n_domains, s->f.iova_mib, (unsigned long long)sim_window_used(s),
                    (unsigned long long)sim_buffer_count(s),
                    (unsigned long long)iova_largest_free(s->window[s->n_domains - 1]));
        return DEV_E_DEVMEM;
    }
    *addr |= (uint64_t)d << DOMAIN_SHIFT;
    sim_advance(s, sim_create_ns(s, bytes));
    return DEV_OK;
}

int sim_buffer_destroy(struct sim *s, uint64_t addr) {
    uint64_t d = addr >> DOMAIN_SHIFT;
    struct iova_space *w = d < (uint64_t)s->n_domains ? s->window[d] : NULL;
    uint64_t before = w ? iova_used(w) : 0;
    if (!w || iova_release(w, addr & (((uint64_t)1 << DOMAIN_SHIFT) - 1)) != 0) {
        moex_errorf("sim: no buffer at 0x%llx", (unsigned long long)addr);
        return DEV_E_ARG;
    }
    sim_advance(s, sim_destroy_ns(s, before - iova_used(w)));
    return DEV_OK;
}

uint64_t sim_window_used(const struct sim *s) {
    uint64_t used = 0;
    for (int i = 0; i < s->n_domains; i++) used += iova_used(s->window[i]);
    return used;
}

uint64_t sim_buffer_count(const struct sim *s) {
    uint64_t n = 0;
    for (int i = 0; i < s->n_domains; i++) n += iova_count(s->window[i]);
    return n;
}

int sim_domains(const struct sim *s) { return s->n_domains; }
uint64_t sim_largest_free(const struct sim *s) {
    uint64_t m = 0;
    for (int i = 0; i < s->n_domains; i++) m = iova_largest_free(s->window[i]) > m ? iova_largest_free(s->window[i]) : m;
    return m;
}
uint64_t sim_tightest_free(const struct sim *s, uint64_t bytes) {
    uint64_t best = 0;
    for (int i = 0; i < s->n_domains; i++) {
        uint64_t room = iova_largest_free(s->window[i]);
        if (room >= bytes && (best == 0 || room < best)) best = room;
    }
    return best;
}
uint64_t sim_domain_used(const struct sim *s, int domain) {
    return domain >= 0 && domain < s->n_domains ? iova_used(s->window[domain]) : 0;
}
uint64_t sim_domain_buffers(const struct sim *s, int domain) {
    return domain >= 0 && domain < s->n_domains ? iova_count(s->window[domain]) : 0;
}
int sim_address_domain(uint64_t addr) { return (int)(addr >> DOMAIN_SHIFT); }

double sim_fill_ns(const struct sim *s, uint64_t bytes) { return (double)bytes / s->f.fill_gbps; }

double sim_pack_ns(const struct sim *s, int K, int N) { return s->f.pack_ns_per_value * (double)K * (double)N; }

static bool chainable(const struct sim *s, int k) {
    return k % (int)s->f.chain_k_multiple == 0 && k <= (int)s->f.chain_k_max;
}

static double fill_of(const struct sim *s, const struct sim_shape *j) {
    return sim_fill_ns(s, (uint64_t)j->m * (uint64_t)j->k + (uint64_t)j->m * (uint64_t)j->n * 4u);
}

/* A job's time on one core inside a chain or stream (ns). */
static double chained_job_ns(const struct sim *s, const struct sim_shape *j) {
    double w = (double)j->k * (double)j->n;
    return 1e3 * s->f.job_us + w / s->f.core_gbps + w * (double)j->m / s->f.core_gmacs;
}

static double single_ns(const struct sim *s, const struct sim_shape *j) {
    const struct sim_figures *f = &s->f;
    double w = (double)j->k * (double)j->n, macs = w * (double)j->m;
    return 1e3 * (f->single_us + f->kslice_us * ceil((double)j->k / f->kslice)) + w / f->single_gbps +
           macs / (f->cores * f->core_gmacs) + fill_of(s, j);
}

double sim_submission_ns(const struct sim *s, enum sim_mode mode, const struct sim_shape *jobs, int n) {
    if (n < 1) return -1;
    if (mode == SIM_SINGLE) return n == 1 ? single_ns(s, jobs) : -1;
    double work = 0, fill = 0;
    for (int i = 0; i < n; i++) {
        if (!chainable(s, jobs[i].k)) return -1;
        work += chained_job_ns(s, &jobs[i]);
        fill += fill_of(s, &jobs[i]);
    }
    if (mode == SIM_STREAM) work /= s->f.cores;
    return 1e3 * s->f.submit_us + work + fill;
}

/* The rknpu device's scratch limits for the figures (dev_rknpu.c's rule). */
static struct rknpu_limits program_limits(const struct sim *s) {
    return rknpu_limits_for((uint64_t)s->f.scratch_mib << 20);
}

/* The generator's programs for the batch, task by task: a submit each, and
 * per task its fixed cost, its weight bytes streamed and its MACs, spread
 * over the cores; activations in and outputs out at the fill rate. -1 when
 * a job does not fit a submit. *submits, *tasks: the counts. */
static double programs_ns(const struct sim *s, const struct sim_shape *jobs, int n, uint64_t *submits, uint64_t *tasks) {
    enum { MAX = 1024 };
    struct rknpu_job_shape shapes[MAX];
    static _Thread_local struct rknpu_task_cost list[1 << 16];
    if (n > MAX) return -1;
    for (int i = 0; i < n; i++) shapes[i] = (struct rknpu_job_shape){ jobs[i].m, jobs[i].k, jobs[i].n, jobs[i].buffer };
    struct rknpu_limits lim = program_limits(s);
    int n_tasks = rknpu_batch_tasks(shapes, n, &lim, list, (int)(sizeof list / sizeof *list));
    if (n_tasks < 0 || n_tasks > (int)(sizeof list / sizeof *list)) return -1;
    double work = 0, fill = 0;
    int last_submit = -1;
    uint64_t n_submits = 0;
    for (int t = 0; t < n_tasks; t++) {
        const struct rknpu_task_cost *c = &list[t];
        if (c->submit != last_submit) n_submits++, last_submit = c->submit;
        work += 1e3 * s->f.task_us + (double)c->weight_bytes / s->f.core_gbps +
                (double)c->mt * (double)c->kc * (double)c->nc / s->f.core_gmacs;
    }
    for (int i = 0; i < n; i++) fill += fill_of(s, &jobs[i]);
    *submits = n_submits;
    *tasks = (uint64_t)n_tasks;
    return (double)n_submits * 1e3 * s->f.submit_us + work / s->f.cores + fill;
}

double sim_batch_ns(const struct sim *s, const struct sim_shape *jobs, int n) {
    enum sim_mode mode = (enum sim_mode)(int)s->f.mode;
    if (n < 1) return 0;
    if (mode == SIM_PROGRAMS) {
        uint64_t submits, tasks;
        return programs_ns(s, jobs, n, &submits, &tasks);
    }
    if (n == 1 || mode == SIM_SINGLE) {
        double total = 0;
        for (int i = 0; i < n; i++) total += single_ns(s, &jobs[i]);
        return total;
    }
    /* The chainable jobs form submissions of at most `chain` jobs (one when
     * chain is 0); the rest go one by one. */
    const int per_submission = s->f.chain >= 1 ? (int)s->f.chain : n;
    double total = 0, work = 0, fill = 0;
    int chained = 0;
    for (int i = 0; i < n; i++) {
        if (!chainable(s, jobs[i].k)) {
            total += single_ns(s, &jobs[i]);
            continue;
        }
        chained++;
        work += chained_job_ns(s, &jobs[i]);
        fill += fill_of(s, &jobs[i]);
        if (chained % per_submission == 0) {
            total += 1e3 * s->f.submit_us + (mode == SIM_STREAM ? work / s->f.cores : work) + fill;
            work = fill = 0;
        }
    }
    if (chained % per_submission) total += 1e3 * s->f.submit_us + (mode == SIM_STREAM ? work / s->f.cores : work) + fill;
    return total;
}

int sim_submit(struct sim *s, const struct sim_shape *jobs, int n, double *ns) {
    uint64_t attempt = ++s->submits;
    if (inject(s, attempt, s->f.fail_submit)) {
        double floor_ns = 1e3 * (n > 1 ? s->f.submit_us : s->f.single_us);
        sim_advance(s, floor_ns);
        if (ns) *ns = floor_ns;
        moex_errorf("sim: submission %llu failed (injected fault)", (unsigned long long)attempt);
        return DEV_E_SUBMIT;
    }
    double t;
    if ((enum sim_mode)(int)s->f.mode == SIM_PROGRAMS) {
        uint64_t submits = 0, tasks = 0;
        t = programs_ns(s, jobs, n, &submits, &tasks);
        if (t < 0) return moex_errorf("sim: a job of the batch does not fit the rknpu programs' scratch"), DEV_E_SHAPE;
        s->program_submits += submits;
        s->program_tasks += tasks;
    } else {
        t = sim_batch_ns(s, jobs, n);
    }
    sim_advance(s, t);
    if (ns) *ns = t;
    return DEV_OK;
}

void sim_program_counts(const struct sim *s, uint64_t *submits, uint64_t *tasks) {
    *submits = s->program_submits;
    *tasks = s->program_tasks;
}
