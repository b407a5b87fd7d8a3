/* moex pack: pack the experts a run would make resident (or every expert)
 * into a device layout once, and the model's matrices into the CPU's
 * interleaved layout, and write them to a pack file that later runs load
 * instead of packing (docs/pack-format.md, src/moe/pack_experts.h,
 * src/model/model_pack.h). */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "model/model.h"
#include "model/model_pack.h"
#include "moe/pack_experts.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>


static void help(FILE *out) {
    fprintf(out,
            "usage: moex pack [-m MODEL] --device D [--hot-budget S] [--stats FILE] [--all] [-o OUT]\n"
            "Packs the experts that a run with the same --device, --hot-budget and --stats pins\n"
            "(every expert when the budget holds them all), or every expert with --all, into\n"
            "the device's layout, and writes them with the plan to a pack file. Runs pick up\n"
            "MODEL.mxpk next to the model by themselves (or take --pack FILE) and fill the\n"
            "device from it instead of packing; admissions while running load from it too.\n"
            "The file also holds the model's matrices in this CPU's interleaved layout (where\n"
            "it has a kernel for them; not with MOEX_INTERLEAVE=0), which runs map instead of\n"
            "repacking them at start-up; --device none writes that layout only.\n\n"
            "  -o, --output FILE   the pack file (default: the model's path with .mxpk for .gguf)\n"
            "      --all           every expert, whatever the plan pins (the plan is kept)\n"
            "  -q, --quiet         no progress bar and no summary\n"
            "Shared options (-t sets the packing threads):\n");
    session_opts_help_device_required(out);
}

static void show_progress(void *user, int done, int total) {
    struct progress *bar = user;
    bar->total = (uint64_t)total;
    progress_update(bar, (uint64_t)done);
}

struct layout_job {
    struct model *m;
    struct threadpool *pool;
    uint64_t bytes;
    int64_t ns;
};

/* After the experts: the model's matrices in the CPU's interleaved layout. */
static int write_layout(void *user, struct packfile_writer *w) {
    struct layout_job *j = user;
    int64_t t0 = time_ns();
    int rc = model_pack_interleaved(j->m, j->pool, w, &j->bytes);
    j->ns = time_ns() - t0;
    return rc;
}

int cmd_pack(int argc, char **argv) {
    struct session_opts o;
    session_opts_defaults(&o);
    const char *out_path = NULL;
    bool all = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        }
        int r = session_opts_parse(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out_path = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--all")) {
            all = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            return cli_usage("pack", "unknown option '%s'", a);
        }
    }
    if (session_opts_finish(&o)) return 2;
    const char *device = o.experts.device;
    bool no_device = !device || !strcmp(device, "none");
    if (no_device && !(o.given & SESSION_GIVEN_DEVICE)) {
        cli_fail("pack: --device is required (cpu, amx, sim or auto; none: the CPU's interleaved layout only): a pack "
                 "file holds one device's layout");
        return 2;
    }
    const char *model_path = o.model_path ? o.model_path : default_model_path();
    char default_out[4096];
    if (!out_path) {
        if (moex_pack_path_for(model_path, default_out, sizeof default_out) != 0) return cli_fail("pack: model path too long");
        out_path = default_out;
    }
    int refused = outputs_check(out_path == default_out ? "the pack file" : "-o", out_path,
                                o.model_path ? "-m" : "the default model", model_path);
    if (!refused) refused = outputs_check("-o", out_path, "--stats", o.experts.stats_path);
    if (refused) return refused;
    /* Opened before the work: a bad path fails now, and the file appears whole or not at all. */
    struct atomic_file *out = atomic_file_create(out_path);
    if (!out) return cli_fail("pack: %s", moex_error());
    struct stat st;
    if (!o.model_path && stat(model_path, &st) != 0 && make_default_model(model_path) != 0) {
        atomic_file_discard(out);
        return 1;
    }
    struct model *m = model_load(model_path);
    struct threadpool *pool = m ? threadpool_new(o.threads, o.pin) : NULL;
    if (!pool) {
        cli_fail("%s", moex_error());
        atomic_file_discard(out);
        model_free(m);
        return 1;
    }
    struct layout_job layout = { m, pool, 0, 0 };
    int64_t t0 = time_ns();
    if (no_device) {
        int rc = model_pack_interleaved_file(m, pool, out, &layout.bytes);
        if (rc == 0 && !quiet)
            printf("moex pack: the CPU's interleaved layout of %d matrices (%.2f GiB) in %.2f s to %s\n",
                   model_interleave_targets(m, NULL), layout.bytes / 1073741824.0, (time_ns() - t0) * 1e-9, out_path);
        if (rc != 0) cli_fail("pack: %s", moex_error());
        threadpool_free(pool);
        model_free(m);
        return rc == 0 ? 0 : 1;
    }
    struct progress bar;
    progress_begin(&bar, "packing experts", (uint64_t)m->moe.n_layers * (uint64_t)m->hp.n_expert);
    struct moe_pack_result r;
    int rc = moe_pack_experts(&m->moe, &o.experts, pool, all, out, quiet ? NULL : show_progress, &bar, write_layout,
                              &layout, &r);
    if (rc == 0) {
        if (!quiet) progress_end(&bar);
        double secs = r.total_ns * 1e-9, pack_secs = r.pack_ns * 1e-9;
        if (!quiet)
            printf("moex pack: %d experts (%d pinned by the plan%s) for device %s in %.2f s; packing read %.2f GiB of "
                   "%s at %.2f GB/s (%.2f s%s), the rest was writing %.2f GiB to %s\n",
                   r.experts, r.pinned, all ? ", all with --all" : "", r.device, secs, r.source_bytes / 1073741824.0,
                   quant_type_name(m->moe.layers[0].gate.type), pack_secs > 0 ? r.source_bytes / pack_secs / 1e9 : 0.0,
                   pack_secs, r.pack_modelled ? ", modelled" : "", r.file_bytes / 1073741824.0, out_path);
        if (!quiet && layout.bytes)
            printf("moex pack: with the CPU's interleaved layout of %d matrices (%.2f GiB, %.2f s)\n",
                   model_interleave_targets(m, NULL), layout.bytes / 1073741824.0, layout.ns * 1e-9);
    } else {
        cli_fail("pack: %s", moex_error());
    }
    threadpool_free(pool);
    model_free(m);
    return rc == 0 ? 0 : 1;
}
