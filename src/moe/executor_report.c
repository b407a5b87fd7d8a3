/* The --profile report of the executor (moe_executor_print). */
#include "moe/executor_impl.h"

#include "pack/packfile.h"

void moe_executor_print(const struct moe_executor *e, FILE *out) {
    int pinned, total;
    moe_executor_slots(e, &pinned, &total);
    fprintf(out, "moex profile: device %s", moe_executor_device(e));
    if (e->dev)
        fprintf(out, " (min M %d, %d expert slots of which %d pinned, resident %.1f MiB%s)", e->min_m, total, pinned,
                moe_executor_resident_bytes(e) / 1048576.0, e->caps->modelled_time ? ", device times modelled" : "");
    fputc('\n', out);
    if (e->dev) {
        struct dev_counters dc;
        dev_get_counters(e->dev, &dc);
        fprintf(out, "moex profile: device failures: %llu allocations, %llu submissions, %llu packs\n",
                (unsigned long long)dc.failed_allocs, (unsigned long long)dc.failed_submissions,
                (unsigned long long)dc.failed_packs);
        char windows[1024], pinned_slots[48] = "none pinned";
        if (e->plan.n_pinned)
            snprintf(pinned_slots, sizeof pinned_slots, "the hottest first: slots 0-%d pinned", MATS * e->plan.n_pinned - 1);
        if (dev_windows_report(e->dev, windows, sizeof windows) == DEV_OK)
            fprintf(out, "moex profile: device memory: staging %.1f MiB, slots %.1f MiB (3 per expert, %s); %s\n",
                    dc.staging_bytes / 1048576.0, (dc.resident_bytes - dc.staging_bytes) / 1048576.0, pinned_slots,
                    windows);
    }
    if (e->note[0]) fprintf(out, "moex profile: note: %s\n", e->note);
    const struct moe_pack_report *r = &e->pack_report;
    if (e->dev)
        fprintf(out, "moex profile: pinned experts: %d filled in %.1f ms, %d loaded from %s, %d packed live%s",
                r->experts_loaded + r->experts_packed, r->fill_ns / 1e6, r->experts_loaded,
                e->pack ? packfile_path(e->pack) : "a pack file", r->experts_packed,
                e->caps->modelled_time ? "" : "\n");
    if (e->dev && e->caps->modelled_time)
        fprintf(out, " (device time %.1f ms, modelled)\n", r->fill_device_ns / 1e6);
    if (e->dev && r->dense_packed)
        fprintf(out, "moex profile: backbone: %d dense matmuls packed in %.1f ms (device time %.1f ms%s)\n",
                r->dense_packed, r->backbone_fill_ns / 1e6, r->backbone_device_ns / 1e6,
                e->caps->modelled_time ? ", modelled" : "");
    fprintf(out, "| phase | batches | rows dev | rows cpu | submits | jobs | packs | loads | hits | misses | admits "
                 "| evicts | fallbacks | hit rows | hit bytes | device ms | pack ms | load ms | cpu ms | wall ms "
                 "| overlap ms |\n");
    fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
                 "|---:|\n");
    static const char *names[MOE_PHASES] = { "prefill", "decode" };
    for (int p = 0; p < MOE_PHASES; p++) {
        const struct moe_phase_counters *c = &e->counters[p];
        double hit_rows = c->hit_rows + c->miss_rows ? 100.0 * c->hit_rows / (double)(c->hit_rows + c->miss_rows) : 0;
        double hit_bytes =
            c->hit_bytes + c->miss_bytes ? 100.0 * c->hit_bytes / (double)(c->hit_bytes + c->miss_bytes) : 0;
        /* Work the two sides did at the same time: their sum past the wall. */
        double busy = (double)(c->device_ns + c->cpu_ns), overlap = busy > c->wall_ns ? busy - c->wall_ns : 0;
        if (e->dev && e->caps->modelled_time) overlap = 0;
        fprintf(out, "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.1f%% "
                     "| %.1f%% | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                names[p], (unsigned long long)c->batches, (unsigned long long)c->rows_device,
                (unsigned long long)c->rows_cpu, (unsigned long long)c->submissions, (unsigned long long)c->jobs,
                (unsigned long long)c->packs, (unsigned long long)c->loads, (unsigned long long)c->hits,
                (unsigned long long)c->misses, (unsigned long long)c->admissions, (unsigned long long)c->evictions,
                (unsigned long long)c->fallbacks, hit_rows, hit_bytes, c->device_ns / 1e6, c->pack_ns / 1e6,
                c->load_ns / 1e6, c->cpu_ns / 1e6, c->wall_ns / 1e6, overlap / 1e6);
    }
    fprintf(out, "moex profile: decode: passes of one new token per sequence (a batched step of several "
                 "sequences too); prefill: the rest\n");
    fprintf(out, "moex profile: rows: routed (token, expert) pairs; jobs: matrices; packs, loads, hits, misses, "
                 "admits, evicts: experts (three matrices each); hit rows / hit bytes: hits' share of the experts "
                 "with rows >= min M, weighted by rows / by the experts' GGUF bytes\n");
    dense_exec_print(e, out);
}
