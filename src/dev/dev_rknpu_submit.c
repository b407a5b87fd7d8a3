/* The rknpu device's submissions: a batch's jobs cut into parts (the jobs of
 * one weight object), each part's programs generated, its features staged
 * into the window's scratch, one submit through the provider (rocket:
 * SUBMIT with in/out BO lists; rknpu: SUBMIT with the task array and a
 * fence), the partial outputs summed in int32 on the host and scaled. */
#include "dev/dev_rknpu_impl.h"

/* ---- submission ---- */

/* The object holding a slot's codes, and the slot's NPU VA. */
static int slot_bo(const struct dev *d, int slot, uint32_t *va) {
    const struct rk_dev *rk = d->backend;
    const int8_t *p = dev_slot_codes(d, slot);
    for (int b = 0; b < rk->n_bos; b++)
        if (p >= rk->bos[b].host && p < rk->bos[b].host + rk->bos[b].size) {
            *va = (uint32_t)(rk->bos[b].iova + (uint64_t)(p - rk->bos[b].host));
            return b;
        }
    return -1;
}

static int rocket_submit(struct rk_dev *rk, struct rk_scratch *s, struct rk_bo *weights, const struct rknpu_stream *st) {
    struct rocket_task *tasks = malloc((size_t)st->programs * sizeof *tasks);
    if (!tasks) return errno = ENOMEM, -1;
    for (int i = 0; i < st->programs; i++)
        tasks[i] = (struct rocket_task){st->base + (uint32_t)((size_t)i * RKNPU_PROGRAM_WORDS * 8), RKNPU_PROGRAM_WORDS};
    uint32_t in[3] = {s->regcmd.handle, s->feature.handle, weights->handle}, out[1] = {s->output.handle};
    struct rocket_job job = {.tasks = (uintptr_t)tasks, .in_bo_handles = (uintptr_t)in, .out_bo_handles = (uintptr_t)out,
                             .task_count = (uint32_t)st->programs, .task_struct_size = sizeof *tasks,
                             .in_bo_handle_count = 3, .out_bo_handle_count = 1};
    struct rocket_submit sub = {.jobs = (uintptr_t)&job, .job_count = 1, .job_struct_size = sizeof job};
    int rc = rk->sys.ioctl(rk->sys.ctx, rk->fds[s->feature.window], ROCKET_IOCTL_SUBMIT, &sub);
    free(tasks);
    return rc;
}

static int vendor_submit(struct rk_dev *rk, struct rk_scratch *s, const struct rknpu_stream *st) {
    struct rknpu_task *tasks = (struct rknpu_task *)(void *)s->tasks.host;
    for (int i = 0; i < st->programs; i++)
        tasks[i] = (struct rknpu_task){.op_idx = 1, .enable_mask = 0xd, .int_mask = 0x300, .int_clear = 0x1ffff,
                                       .regcfg_amount = rknpu_regcfg_amount(RKNPU_PROGRAM_WORDS),
                                       .regcmd_addr = st->base + (uint64_t)i * RKNPU_PROGRAM_WORDS * 8};
    if (bo_to_device(rk, &s->tasks, (uint64_t)st->programs * sizeof *tasks) != 0) return -1;
    struct rknpu_submit sub = {.flags = RKNPU_JOB_PC | RKNPU_JOB_PINGPONG | RKNPU_JOB_FENCE_OUT,
                               .timeout = RK_SUBMIT_TIMEOUT_MS, .task_number = (uint32_t)st->programs,
                               .task_obj_addr = s->tasks.obj_addr, .iommu_domain_id = (uint32_t)s->tasks.window,
                               .core_mask = 1, .fence_fd = -1};
    for (int i = 0; i < 3; i++) sub.subcore_task[i] = (struct rknpu_subcore_task){0, (uint32_t)st->programs};
    if (rk->sys.ioctl(rk->sys.ctx, rk->fds[0], RKNPU_IOCTL_SUBMIT, &sub) != 0) return -1;
    int rc = sub.fence_fd >= 0 ? rk->sys.wait_fence(rk->sys.ctx, sub.fence_fd, RK_SUBMIT_TIMEOUT_MS) : 0;
    int err = errno;
    if (sub.fence_fd >= 0) rk->sys.close(rk->sys.ctx, sub.fence_fd);
    errno = err;
    return rc;
}

/* Records one submit as a golden capture: its programs, feature cubes, the
 * weights of its jobs and the output partials the device wrote. */
static int capture(struct dev *d, const struct dev_exec_job *jobs, const int *order, int n,
                   const struct rknpu_stream *st, uint64_t feat, uint64_t out) {
    struct rk_dev *rk = d->backend;
    struct rknpu_capture_region regions[3 + DEV_MAX_JOBS];
    int r = 3;
    uint32_t va = 0;
    struct rk_scratch *s = &rk->scratch[rk->bos[slot_bo(d, jobs[order[0]].slot, &va)].window];
    for (int i = 0; i < n; i++) { /* each weight once */
        const struct dev_slot *slot = &d->slots[jobs[order[i]].slot];
        slot_bo(d, jobs[order[i]].slot, &va);
        bool seen = false;
        for (int k = 3; k < r; k++) seen |= regions[k].va == va;
        if (!seen)
            regions[r++] = (struct rknpu_capture_region){RKNPU_CAP_WEIGHTS, va, (uint64_t)slot->K * (uint64_t)slot->N,
                                                         dev_slot_codes(d, jobs[order[i]].slot)};
    }
    regions[0] = (struct rknpu_capture_region){RKNPU_CAP_PROGRAMS, st->base, st->n * 8, s->regcmd.host};
    regions[1] = (struct rknpu_capture_region){RKNPU_CAP_FEATURES, (uint32_t)s->feature.iova, feat, s->feature.host};
    regions[2] = (struct rknpu_capture_region){RKNPU_CAP_OUTPUT, (uint32_t)s->output.iova, out, s->output.host};
    char path[256];
    static _Atomic int next_capture; /* unique among the devices of a process */
    snprintf(path, sizeof path, "%s/capture-%04d.bin", rk->capture_dir, atomic_fetch_add(&next_capture, 1));
    if (rknpu_capture_write(path, rk->driver == RKNPU_DRIVER_VENDOR, st->programs, regions, r) != 0)
        return moex_errorf("rknpu: recording %s: %s", path, strerror(errno));
    return 0;
}

/* One submit of a batch: jobs order[0..n) on the weight object b. */
struct part {
    const int *order;
    int n, b;
    struct rknpu_stream st;
    uint64_t feat, out, out_at[DEV_MAX_JOBS]; /* bytes of features and partials; each job's partials */
    int rc, err;
};

/* Writes a part's features and programs into its window's scratch and
 * submits them. Under rocket SUBMIT only queues: parts on other fds (cores)
 * run meanwhile, and part_finish waits. */
static void part_start(struct dev *d, const struct dev_exec_job *jobs, struct part *pt) {
    struct rk_dev *rk = d->backend;
    struct rk_bo *weights = &rk->bos[pt->b];
    struct rk_scratch *s = &rk->scratch[weights->window];
    pt->st = (struct rknpu_stream){.words = (uint64_t *)(void *)s->regcmd.host, .cap = rk->limits.program_words,
                                   .base = (uint32_t)s->regcmd.iova};
    pt->feat = pt->out = 0;
    pt->err = 0;
    for (int i = 0; i < pt->n; i++) {
        const struct dev_exec_job *j = &jobs[pt->order[i]];
        const struct dev_slot *slot = &d->slots[j->slot];
        uint32_t w_va = 0;
        slot_bo(d, j->slot, &w_va);
        rknpu_feature_fill(s->feature.host + pt->feat, j->act, (size_t)slot->K, j->m, slot->K);
        struct rknpu_matmul mm = {j->m, slot->K, slot->N, (uint32_t)(s->feature.iova + pt->feat), w_va,
                                  (uint32_t)(s->output.iova + pt->out)};
        if (rknpu_emit_matmul(&pt->st, &mm) != 0) {
            pt->rc = DEV_E_SUBMIT;
            return;
        }
        pt->out_at[i] = pt->out;
        pt->feat += rknpu_feature_bytes(j->m, slot->K);
        pt->out += rknpu_output_bytes(j->m, slot->K, slot->N);
    }
    rknpu_stream_link(&pt->st, rk->driver == RKNPU_DRIVER_VENDOR);
    int rc = bo_to_device(rk, &s->feature, pt->feat) | bo_to_device(rk, &s->regcmd, pt->st.n * 8);
    if (rk->driver == RKNPU_DRIVER_ROCKET) rc |= bo_to_device(rk, &s->output, pt->out);
    if (weights->dirty) rc |= bo_to_device(rk, weights, weights->size);
    weights->dirty = rc != 0;
    if (rc == 0) {
        if (rk->driver == RKNPU_DRIVER_ROCKET) {
            rc = rocket_submit(rk, s, weights, &pt->st);
        } else {
            /* the first submit into fresh output objects leaves them stale: run it twice */
            rc = vendor_submit(rk, s, &pt->st);
            if (rc == 0 && !s->warm) rc = vendor_submit(rk, s, &pt->st);
            s->warm = rc == 0;
        }
    }
    pt->err = rc != 0 ? errno : 0;
    pt->rc = rc != 0 ? DEV_E_SUBMIT : DEV_OK;
}

/* Waits for a started part and writes its jobs' outputs. */
static void part_finish(struct dev *d, const struct dev_exec_job *jobs, struct part *pt) {
    struct rk_dev *rk = d->backend;
    struct rk_scratch *s = &rk->scratch[rk->bos[pt->b].window];
    if (pt->rc == DEV_OK && bo_from_device(rk, &s->output, pt->out) != 0) pt->rc = DEV_E_SUBMIT, pt->err = errno;
    if (pt->rc != DEV_OK) {
        if (rk->driver == RKNPU_DRIVER_VENDOR) vendor_action(rk, RKNPU_ACT_RESET); /* the driver's self-healing */
        struct rknpu_fake_stats fs = {0};
        if (rk->fake) rknpu_fake_get_stats(rk->fake, &fs);
        char why[256];
        snprintf(why, sizeof why, "%s", pt->err ? strerror(pt->err) : moex_error());
        moex_errorf("rknpu: a submit of %d programs failed: %s%s%s", pt->st.programs, why,
                    fs.refusals ? "; the model: " : "", fs.refusals ? fs.why : "");
        return;
    }
    if (rk->capture_dir[0] && capture(d, jobs, pt->order, pt->n, &pt->st, pt->feat, pt->out) != 0) {
        pt->rc = DEV_E_SUBMIT;
        return;
    }
    const int32_t *partials = (const int32_t *)(const void *)s->output.host;
    for (int i = 0; i < pt->n; i++) {
        const struct dev_exec_job *j = &jobs[pt->order[i]];
        const struct dev_slot *slot = &d->slots[j->slot];
        const float *cs = dev_slot_scales(d, j->slot);
        const int32_t *p = partials + pt->out_at[i] / 4;
        for (int m = 0; m < j->m; m++)
            for (int c = 0; c < slot->N; c++)
                j->out[(size_t)m * j->out_stride + (size_t)c] =
                    w8a8_out(rknpu_output_at(p, j->m, slot->K, slot->N, m, c), j->act_scale[m], cs[c]);
    }
}

int rk_submit(struct dev *d, const struct dev_exec_job *jobs, int n_jobs, uint64_t *modelled_ns) {
    (void)modelled_ns;
    struct rk_dev *rk = d->backend;
    rk->in_submit = true;
    struct rknpu_job_shape shapes[DEV_MAX_JOBS];
    int submit_of[DEV_MAX_JOBS], order[DEV_MAX_JOBS], first[DEV_MAX_JOBS + 1];
    for (int j = 0; j < n_jobs; j++) {
        uint32_t va;
        const struct dev_slot *s = &d->slots[jobs[j].slot];
        shapes[j] = (struct rknpu_job_shape){jobs[j].m, s->K, s->N, slot_bo(d, jobs[j].slot, &va)};
        if (shapes[j].buffer < 0) return moex_errorf("rknpu: slot %d is in no buffer object", jobs[j].slot), DEV_E_STATE;
    }
    int parts = rknpu_batch_plan(shapes, n_jobs, &rk->limits, submit_of, order);
    if (parts < 0) return DEV_E_SHAPE;
    for (int at = 0, part = 0; part <= parts; part++) { /* where each part's jobs start in order[] */
        first[part] = at;
        while (at < n_jobs && submit_of[order[at]] == part) at++;
    }
    /* waves of at most one part per window: each window's scratch holds one part at a time */
    bool *done = calloc((size_t)parts, sizeof *done);
    struct part *wave = malloc(RK_MAX_WINDOWS * sizeof *wave);
    if (!done || !wave) {
        free(done);
        free(wave);
        return moex_errorf("rknpu: out of memory"), DEV_E_NOMEM;
    }
    int rc = DEV_OK;
    for (int left = parts; left > 0 && rc == DEV_OK;) {
        int n = 0;
        bool busy[RK_MAX_WINDOWS] = {false};
        for (int p = 0; p < parts && n < RK_MAX_WINDOWS; p++) {
            int b = shapes[order[first[p]]].buffer, w = rk->bos[b].window;
            if (done[p] || busy[w]) continue;
            busy[w] = done[p] = true;
            wave[n++] = (struct part){.order = order + first[p], .n = first[p + 1] - first[p], .b = b};
        }
        for (int i = 0; i < n; i++) part_start(d, jobs, &wave[i]);
        for (int i = 0; i < n; i++) {
            part_finish(d, jobs, &wave[i]);
            if (rc == DEV_OK && wave[i].rc != DEV_OK) rc = wave[i].rc;
        }
        left -= n;
    }
    free(done);
    free(wave);
    return rc;
}
