/* moex pack: pack the experts a run would make resident (or every expert)
 * into a device layout once, and the model's matrices into the CPU's
 * interleaved layout, and write them to a pack file that later runs load
 * instead of packing (docs/pack-format.md, src/moe/pack_experts.h,
 * src/model/model_pack.h). */
#include "cli.h"
#include "outputs.h"
#include "session.h"

#include "progress.h"

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
            "it has a kernel for them; not with --no-interleave), which runs map instead of\n"
            "repacking them at start-up; --device none writes that layout only.\n\n"
            "  -o, --output FILE   the pack file (default: the model's path with .mxpk for .gguf)\n"
            "      --all           every expert, whatever the plan pins (the plan is kept)\n"
            "  -q, --quiet         no progress bar and no summary\n"
            "Shared options (-t sets the packing threads):\n");
    session_opts_help_with(out, &(struct session_help){ .groups = 0, .device_required = true });
}

int cmd_pack(int argc, char **argv) {
    struct session_opts o;
    session_opts_defaults(&o);
    o.groups = 0; /* no context, no run: the options of one are unknown here */
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
    struct moex_device_desc desc;
    bool offloads = device && moex_device_describe(device, &desc) == 0 && desc.offloads;
    if (!offloads && !(o.given & SESSION_GIVEN_DEVICE)) {
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
    moex_file *out = moex_file_create(out_path);
    if (!out) return cli_fail("pack: %s", moex_last_error());
    struct stat st;
    if (!o.model_path && stat(model_path, &st) != 0 && make_default_model(model_path) != 0) {
        moex_file_discard(out);
        return 1;
    }
    struct moex_model_params mp;
    session_model_params(&o, &mp);
    mp.path = model_path;
    mp.device.no_pack = true; /* the experts come from the model, never from an older pack file */
    struct progress bar;
    mp.progress = quiet ? NULL : progress_report;
    mp.user = &bar;
    moex_model *m = moex_model_load(&mp);
    if (!m) {
        cli_fail("%s", moex_last_error());
        moex_file_discard(out);
        return 1;
    }
    struct moex_pack_result r;
    int rc = moex_pack(m, all, out, &r);
    if (rc == 0 && r.experts == 0) {
        if (!quiet)
            printf("moex pack: the CPU's interleaved layout of %d matrices (%.2f GiB) in %.2f s to %s\n",
                   r.interleaved, r.interleaved_bytes / 1073741824.0, r.interleave_s, out_path);
    } else if (rc == 0) {
        if (!quiet && r.interleaved)
            printf("moex pack: the CPU's interleaved layout of %d matrices (%.2f GiB, %.2f s) after the experts\n",
                   r.interleaved, r.interleaved_bytes / 1073741824.0, r.interleave_s);
        if (!quiet)
            printf("moex pack: %d experts (%d pinned by the plan%s) for device %s in %.2f s; packing read %.2f GiB of "
                   "%s at %.2f GB/s (%.2f s%s), the rest was writing %.2f GiB to %s\n",
                   r.experts, r.pinned, all ? ", all with --all" : "", r.device, r.total_s, r.source_bytes / 1073741824.0,
                   r.weight_type, r.pack_s > 0 ? r.source_bytes / r.pack_s / 1e9 : 0.0, r.pack_s,
                   r.pack_modelled ? ", modelled" : "", r.file_bytes / 1073741824.0, out_path);
    } else {
        cli_fail("pack: %s", moex_last_error());
    }
    moex_model_free(m);
    return rc == 0 ? 0 : 1;
}
