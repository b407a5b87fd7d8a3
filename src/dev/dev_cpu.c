/* The cpu device: an int8 GEMM over [N][K] weights. The plain C kernel is
 * the reference; SIMD kernels (dev_cpu_gemm.h) equal it bit for bit, since
 * int32 sums are exact in any order and the output is written by the one
 * W8A8 expression. */
#include "dev/dev_cpu_gemm.h"
#include "dev/dev_impl.h"

#include "core/threadpool.h"
#include "pack/w8a8.h"

/* Columns per task: 32 rows of weights (64 KiB at K = 2048) stay in L2
 * while every activation row passes over them. */
enum { COLS_PER_TASK = 32 };

static int32_t dot_i8(const int8_t *a, const int8_t *w, int K) {
    int32_t s = 0;
    for (int k = 0; k < K; k++) s += (int32_t)a[k] * (int32_t)w[k];
    return s;
}

/* Four channels at once: each activation value is loaded once for four
 * weight rows, which the compiler's vectorizer turns into wide multiplies. */
static void dot4_i8(const int8_t *a, const int8_t *w, size_t K, int32_t acc[4]) {
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const int8_t *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
    for (size_t k = 0; k < K; k++) {
        int32_t x = a[k];
        s0 += x * w0[k];
        s1 += x * w1[k];
        s2 += x * w2[k];
        s3 += x * w3[k];
    }
    acc[0] = s0;
    acc[1] = s1;
    acc[2] = s2;
    acc[3] = s3;
}

void dev_cpu_gemm_ref(const int8_t *act, const float *act_scale, int m, const int8_t *w, const float *w_scale, int n,
                      int K, float *out, size_t out_stride) {
    for (int i = 0; i < m; i++) {
        const int8_t *a = act + (size_t)i * (size_t)K;
        float *o = out + (size_t)i * out_stride;
        const float rs = act_scale[i];
        int c = 0;
        for (; c + 4 <= n; c += 4) {
            int32_t acc[4];
            dot4_i8(a, w + (size_t)c * (size_t)K, (size_t)K, acc);
            for (int j = 0; j < 4; j++) o[c + j] = w8a8_out(acc[j], rs, w_scale[c + j]);
        }
        for (; c < n; c++) o[c] = w8a8_out(dot_i8(a, w + (size_t)c * (size_t)K, K), rs, w_scale[c]);
    }
}

dev_cpu_gemm_fn dev_cpu_gemm_for(enum isa isa) {
    switch (isa) {
    case ISA_SCALAR: return dev_cpu_gemm_ref;
#if defined(__x86_64__)
    case ISA_AVX2:
    case ISA_AVX512: /* AVX-512 machines run the AVX2 kernel */
        return isa_available(isa) ? dev_cpu_gemm_avx2 : NULL;
#endif
#if defined(__aarch64__)
    case ISA_NEON: return isa_available(ISA_NEON) ? dev_cpu_gemm_neon : NULL;
#endif
    default: return NULL;
    }
}

dev_cpu_gemm_fn dev_cpu_gemm_best(void) {
    dev_cpu_gemm_fn fn = dev_cpu_gemm_for(quant_active_isa());
    return fn ? fn : dev_cpu_gemm_ref;
}

struct run_ctx {
    const struct dev *d;
    const struct dev_exec_job *jobs;
    int n_jobs;
    dev_cpu_gemm_fn gemm;
    int64_t task_start[DEV_MAX_JOBS + 1]; /* first task of each job */
};

static void run_tasks(void *arg, int64_t begin, int64_t end, int thread_index) {
    (void)thread_index;
    const struct run_ctx *c = arg;
    int j = 0;
    for (int64_t t = begin; t < end; t++) {
        while (c->task_start[j + 1] <= t) j++;
        const struct dev_exec_job *job = &c->jobs[j];
        const struct dev_slot *slot = &c->d->slots[job->slot];
        const int K = slot->K;
        const int n0 = (int)(t - c->task_start[j]) * COLS_PER_TASK;
        const int n1 = n0 + COLS_PER_TASK < slot->N ? n0 + COLS_PER_TASK : slot->N;
        const int8_t *w = dev_slot_codes(c->d, job->slot) + (size_t)n0 * (size_t)K;
        const float *cs = dev_slot_scales(c->d, job->slot) + n0;
        c->gemm(job->act, job->act_scale, job->m, w, cs, n1 - n0, K, job->out + n0, job->out_stride);
    }
}

void dev_cpu_run(struct dev *d, const struct dev_exec_job *jobs, int n_jobs) {
    struct run_ctx c = {.d = d, .jobs = jobs, .n_jobs = n_jobs, .gemm = dev_cpu_gemm_best()};
    c.task_start[0] = 0;
    for (int j = 0; j < n_jobs; j++) {
        int N = d->slots[jobs[j].slot].N;
        c.task_start[j + 1] = c.task_start[j] + (N + COLS_PER_TASK - 1) / COLS_PER_TASK;
    }
    threadpool_parallel_for(d->pool, c.task_start[n_jobs], 1, run_tasks, &c);
}

static int cpu_open(struct dev *d, const struct dev_options *opt) {
    (void)opt;
    const bool simd = dev_cpu_gemm_best() != dev_cpu_gemm_ref;
    d->layout = PACK_ROWS;
    d->caps = (struct dev_caps){
        .name = "cpu",
        .description = simd ? "int8 GEMM, SIMD kernel equal to the plain C reference bit for bit"
                            : "plain C int8 GEMM (the reference)",
        .compute = DEV_COMPUTE_W8A8,
        .min_m = 1,
        .k_multiple = 1,
        .n_multiple = 1,
        .k_max = PACK_MAX_K,
        .n_max = 1 << 20,
        .max_jobs = DEV_MAX_JOBS,
        .modelled_time = false,
        /* The plain C loop's figures, about 4 int8 MACs per ns and core,
         * kept for every kernel: this is the reference device, and the
         * planner is not to prefer it over the CPU's own kernels. The SIMD
         * kernels run 4-6x faster and packing 5-20x (bench/probe.md). */
        .submit_ns = 2000,
        .job_ns = 500,
        .weight_ns_per_byte = 0.1,
        .ns_per_mac = 0.25,
        .pack_ns_per_value = 1.0,
        .maps_host_pages = true,
    };
    return DEV_OK;
}

static int cpu_submit(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    (void)modelled_ns;
    dev_cpu_run(d, jobs, n_jobs);
    return DEV_OK;
}

const struct dev_ops dev_cpu_ops = {
    .open = cpu_open,
    .submit = cpu_submit,
};
