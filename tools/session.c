#include "session.h"

#include "cli.h"
#include "outputs.h"
#include "progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int parse_device(const char *what, const char *v, struct session_opts *o) {
    struct moex_device_desc desc;
    if (moex_device_describe(v, &desc) == 0) { o->experts.device = desc.name; return 0; }
    char names[128];
    snprintf(names, sizeof names, "%s", moex_device_names());
    for (char *c = names; *c; c++) if (*c == ' ') *c = ',';
    cli_fail("%s: invalid value '%s' (expected one of %s)", what, v, names);
    return -1;
}

/* "6G", "512M", a byte count, or "40%" of all experts' device bytes. */
static int parse_budget(const char *what, const char *v, struct session_opts *o) {
    size_t n = strlen(v);
    if (n > 1 && v[n - 1] == '%') {
        char num[64];
        double pct;
        if (n - 1 >= sizeof num) return cli_fail("%s: invalid value '%s'", what, v), -1;
        memcpy(num, v, n - 1);
        num[n - 1] = 0;
        if (cli_parse_float(what, num, 0, 100, &pct)) return -1;
        o->experts.hot_fraction = pct / 100.0;
        o->experts.hot_budget = 0;
        if (pct == 0) o->experts.hot_fraction = 0;
        return 0;
    }
    o->experts.hot_fraction = 0;
    return cli_parse_size(what, v, &o->experts.hot_budget);
}

static int parse_bool(const char *what, const char *v, bool *out) {
    if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes")) *out = true;
    else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no")) *out = false;
    else return cli_fail("%s: invalid value '%s' (expected 1/0, on/off, true/false, yes/no)", what, v), -1;
    return 0;
}

static int parse_pack_env(const char *v, struct session_opts *o) {
    if (!*v) return cli_fail("MOEX_PACK: invalid value '' (expected a pack file, or 0/off for --no-pack)"), -1;
    bool off = !strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no");
    o->experts.no_pack = off;
    o->experts.pack_path = off ? NULL : v;
    return 0;
}

/* The device table's names and one-line summaries, for --help. */
static void print_devices(FILE *out) {
    char names[128];
    snprintf(names, sizeof names, "%s", moex_device_names());
    for (char *save = NULL, *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        struct moex_device_desc d;
        if (moex_device_describe(name, &d) == 0) fprintf(out, "                        %-6s %s\n", name, d.summary);
    }
}

/* Device options given on the command line where they change nothing are
 * said once, as the work starts (the same variables, set for every run, are
 * not). */
static void note_unused(const struct session_opts *o) {
    static const struct { unsigned bit; const char *name; } device_only[] = {
        { SESSION_GIVEN_BUDGET, "--hot-budget" }, { SESSION_GIVEN_MIN_M, "--min-m" },
        { SESSION_GIVEN_STATS, "--stats" },       { SESSION_GIVEN_OVERLAP, "--no-overlap" },
        { SESSION_GIVEN_SIM, "--sim" },           { SESSION_GIVEN_ADAPTIVE, "--adaptive-placement" },
        { SESSION_GIVEN_BACKBONE, "--no-backbone" },  { SESSION_GIVEN_RKNPU, "--rknpu" },
    };
    const char *device = o->experts.device;
    struct moex_device_desc desc = { 0 };
    moex_device_describe(device, &desc);
    char unused[128] = "";
    for (size_t i = 0; i < sizeof device_only / sizeof device_only[0]; i++) {
        bool used = desc.offloads && (device_only[i].bit == SESSION_GIVEN_SIM || device_only[i].bit == SESSION_GIVEN_RKNPU
                                          ? desc.figures_option && !strcmp(desc.figures_option, device_only[i].name)
                                          : true);
        if (!(o->given & device_only[i].bit) || used) continue;
        size_t n = strlen(unused);
        snprintf(unused + n, sizeof unused - n, "%s%s", n ? ", " : "", device_only[i].name);
    }
    if (unused[0])
        fprintf(stderr, "moex: note: %s change%s nothing with --device %s\n", unused, strchr(unused, ',') ? "" : "s",
                device);
}

int session_opts_defaults(struct session_opts *o) {
    memset(o, 0, sizeof *o);
    o->groups = SESSION_ALL;
    o->pin = true;
    o->experts.device = "none";
    o->experts.hot_fraction = 1.0;
    return 0;
}

int session_opts_finish(struct session_opts *o) {
    const char *v;
    int64_t n;
    bool overlap;
    unsigned given = o->given;
    o->finished = true;
    if ((given & SESSION_GIVEN_PACK) && (given & SESSION_GIVEN_NO_PACK))
        return cli_fail("--pack %s and --no-pack exclude each other", o->experts.pack_path ? o->experts.pack_path : ""), -1;
    if (cli_check_env(o->isa)) return -1;
    if (!(given & SESSION_GIVEN_INTERLEAVE) && cli_env_no_interleave(&o->no_interleave)) return -1;
    if (!(given & SESSION_GIVEN_DEVICE) && (v = getenv("MOEX_DEVICE")) && parse_device("MOEX_DEVICE", v, o)) return -1;
    if (!(given & SESSION_GIVEN_BUDGET) && (v = getenv("MOEX_HOT_BUDGET")) && parse_budget("MOEX_HOT_BUDGET", v, o))
        return -1;
    if (!(given & SESSION_GIVEN_MIN_M) && (v = getenv("MOEX_MIN_M"))) {
        if (cli_parse_int("MOEX_MIN_M", v, 1, 1 << 20, &n)) return -1;
        o->experts.min_m = (int)n;
    }
    if (!(given & SESSION_GIVEN_STATS) && (v = getenv("MOEX_STATS"))) {
        if (!*v) return cli_fail("MOEX_STATS: invalid value '' (expected a statistics file)"), -1;
        o->experts.stats_path = v;
    }
    if (!(given & SESSION_GIVEN_OVERLAP) && (v = getenv("MOEX_OVERLAP"))) {
        if (parse_bool("MOEX_OVERLAP", v, &overlap)) return -1;
        o->experts.no_overlap = !overlap;
    }
    if (!(given & SESSION_GIVEN_BACKBONE) && (v = getenv("MOEX_BACKBONE"))) {
        bool backbone;
        if (parse_bool("MOEX_BACKBONE", v, &backbone)) return -1;
        o->experts.no_backbone = !backbone;
    }
    if (!(given & (SESSION_GIVEN_SIM | SESSION_GIVEN_RKNPU)) && (v = getenv("MOEX_SIM"))) {
        if (cli_check_sim("MOEX_SIM", v, v)) return -1;
        o->experts.sim_figures = v;
    }
    if (!(given & (SESSION_GIVEN_PACK | SESSION_GIVEN_NO_PACK)) && (v = getenv("MOEX_PACK")) && parse_pack_env(v, o))
        return -1;
    return 0;
}

int session_opts_parse(struct session_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    int64_t n;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->model_path = v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--threads", v, 1, 256, &n)) return -1;
        o->threads = (int)n;
    } else if ((o->groups & SESSION_CONTEXT) && (!strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--ctx"))) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--ctx", v, 1, 1 << 20, &n)) return -1;
        o->n_ctx = (int)n;
        o->given |= SESSION_GIVEN_CTX;
    } else if ((o->groups & SESSION_CONTEXT) && (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "--batch"))) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--batch", v, 1, 1 << 16, &n)) return -1;
        o->n_batch = (int)n;
    } else if ((o->groups & SESSION_CONTEXT) && (!strcmp(a, "--kv-type"))) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "f16")) o->kv_f32 = false;
        else if (!strcmp(v, "f32")) o->kv_f32 = true;
        else return cli_fail("--kv-type: invalid value '%s' (expected f16 or f32)", v), -1;
    } else if (!strcmp(a, "--no-warmup")) {
        o->no_warmup = true;
    } else if (!strcmp(a, "--no-pin")) {
        o->pin = false;
    } else if (!strcmp(a, "--isa")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->isa = v;
    } else if (!strcmp(a, "--no-interleave")) {
        o->no_interleave = true;
        o->given |= SESSION_GIVEN_INTERLEAVE;
    } else if (!strcmp(a, "--device")) {
        if (!(v = cli_value(argc, argv, i)) || parse_device("--device", v, o)) return -1;
        o->given |= SESSION_GIVEN_DEVICE;
    } else if (!strcmp(a, "--hot-budget")) {
        if (!(v = cli_value(argc, argv, i)) || parse_budget("--hot-budget", v, o)) return -1;
        o->given |= SESSION_GIVEN_BUDGET;
    } else if ((o->groups & SESSION_RUNTIME) && (!strcmp(a, "--min-m"))) {
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int("--min-m", v, 1, 1 << 20, &n)) return -1;
        o->experts.min_m = (int)n;
        o->given |= SESSION_GIVEN_MIN_M;
    } else if (!strcmp(a, "--stats")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->experts.stats_path = v;
        o->given |= SESSION_GIVEN_STATS;
    } else if ((o->groups & SESSION_RUNTIME) && (!strcmp(a, "--no-overlap"))) {
        o->experts.no_overlap = true;
        o->given |= SESSION_GIVEN_OVERLAP;
    } else if (!strcmp(a, "--no-backbone")) {
        o->experts.no_backbone = true;
        o->given |= SESSION_GIVEN_BACKBONE;
    } else if ((o->groups & SESSION_RUNTIME) && (!strcmp(a, "--adaptive-placement"))) {
        o->experts.adaptive = true;
        o->given |= SESSION_GIVEN_ADAPTIVE;
    } else if (!strcmp(a, "--sim")) {
        if (!(v = cli_value(argc, argv, i)) || cli_check_sim("--sim", v, v)) return -1;
        o->experts.sim_figures = v;
        o->given |= SESSION_GIVEN_SIM;
    } else if (!strcmp(a, "--rknpu")) { /* the rknpu device's options travel in the sim figures' string */
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (moex_check_rknpu_options(v)) return cli_fail("--rknpu: %s", moex_last_error()), -1;
        o->experts.sim_figures = v;
        o->given |= SESSION_GIVEN_RKNPU;
    } else if ((o->groups & SESSION_RUNTIME) && (!strcmp(a, "--pack"))) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->experts.pack_path = v;
        o->experts.no_pack = false;
        o->given |= SESSION_GIVEN_PACK;
    } else if ((o->groups & SESSION_RUNTIME) && (!strcmp(a, "--no-pack"))) {
        o->experts.no_pack = true;
        o->given |= SESSION_GIVEN_NO_PACK;
    } else if ((o->groups & SESSION_REPORTS) && (!strcmp(a, "--profile"))) {
        o->profile = true;
    } else if ((o->groups & SESSION_REPORTS) && (!strcmp(a, "--trace"))) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        o->trace_path = v;
    } else {
        return 0;
    }
    return 1;
}

void session_opts_help_with(FILE *out, const struct session_help *h) {
    unsigned g = h->groups;
    fprintf(out,
            "  -m, --model FILE    GGUF model (default: the built-in small model, made on first use\n"
            "                      in %s)\n",
            default_model_path());
    if (!h->own_threads) fprintf(out, "  -t, --threads N     worker threads (default: physical cores)\n");
    if (g & SESSION_CONTEXT)
        fprintf(out,
                "  -c, --ctx-size N    context length in tokens (default: %s)\n"
                "  -b, --batch-size N  most tokens per forward pass (default: %s)\n"
                "      --ctx N, --batch N  the same as --ctx-size, --batch-size\n"
                "      --kv-type T     KV cache type: f16 (default) or f32\n",
                h->ctx_default ? h->ctx_default : "min(4096, trained)", h->batch_default ? h->batch_default : "512");
    fprintf(out,
            "      --device D      where hot experts and the backbone (attention projections, shared\n"
            "                      experts, dense FFN layers, lm head) run%s [MOEX_DEVICE]:\n",
            h->device_required ? " (required; none: the CPU's\n                      interleaved layout only)" : "");
    print_devices(out);
    fprintf(out,
            "      --hot-budget S  device bytes: 6G, 512M (the staging buffers first, then the\n"
            "                      backbone, then experts), or 40%% of all experts (the staging and\n"
            "                      the whole backbone on top; default 100%%) [MOEX_HOT_BUDGET]\n");
    if (g & SESSION_RUNTIME)
        fprintf(out,
                "      --min-m N       rows from which an expert or a resident dense matmul goes to the\n"
                "                      device (default: the device's figure) [MOEX_MIN_M]\n");
    fprintf(out, "      --stats FILE    routing statistics (moex profile) for the pinned experts [MOEX_STATS]\n");
    if (g & SESSION_RUNTIME)
        fprintf(out, "      --no-overlap    run device and CPU experts one after the other [MOEX_OVERLAP=0]\n");
    fprintf(out,
            "      --no-backbone   keep the dense matmuls on the CPU: the budget is the staging's and\n"
            "                      the experts' only [MOEX_BACKBONE=0]\n");
    if (g & SESSION_RUNTIME)
        fprintf(out,
                "      --adaptive-placement\n"
                "                      admit experts by the CPU times measured in this run instead of a\n"
                "                      fixed cost model (logits may then differ run to run)\n");
    fprintf(out, "      --sim FIGURES   sim device figures: rk3588[,key=value...] [MOEX_SIM]\n");
    fprintf(out, "      --rknpu OPTS    rknpu device options: fake=rocket|rknpu, cores=N, domains=N, ... (docs/rknpu.md)\n");
    if (g & SESSION_RUNTIME)
        fprintf(out,
                "      --pack FILE     fill the device's experts, and the CPU's interleaved layout, from this\n"
                "                      pack file (moex pack) instead of packing them (default: MODEL.mxpk next\n"
                "                      to the model, when it exists);\n"
                "                      a file made for another model, device or version is refused and\n"
                "                      the experts are packed live [MOEX_PACK]\n"
                "      --no-pack       pack experts live, ignoring pack files [MOEX_PACK=0]\n");
    if (g & SESSION_REPORTS)
        fprintf(out,
                "      --profile       print placement counters per phase at the end: experts, then\n"
                "                      each kind of dense matmul (rows on the device and the CPU)\n"
                "      --trace FILE    write a Chrome trace-event timeline (opens in Perfetto)\n");
    fprintf(out,
            "      --no-warmup     taken for llama.cpp's command lines: moex runs no warm-up pass\n"
            "                      before the work (moex bench: no warm-up run before each test)\n"
            "      --no-pin        do not pin worker threads to CPUs (pinned by default: an unpinned\n"
            "                      pool migrates and costs ~25 us per parallel step instead of ~2)\n"
            "      --isa I         the most the CPU kernels may use: scalar, avx2, avx512 or neon\n"
            "                      (default: the best this CPU has) [MOEX_ISA]\n"
            "      --no-interleave keep the file's row layout: no interleaved copies of the Q4_K/Q6_K\n"
            "                      weights for this CPU's kernels [MOEX_INTERLEAVE=0]\n");
}

void session_opts_help(FILE *out) { session_opts_help_with(out, &(struct session_help){ .groups = SESSION_ALL }); }

const char *default_model_path(void) {
    static char path[4096];
    if (path[0]) return path;
    const char *dir = getenv("MOEX_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(path, sizeof path, "%s/small.gguf", dir);
    else if (xdg && *xdg) snprintf(path, sizeof path, "%s/moex/small.gguf", xdg);
    else snprintf(path, sizeof path, "%s/.cache/moex/small.gguf", home && *home ? home : "/tmp");
    return path;
}

/* A context longer than the one the model was trained for runs, but its
 * positions past the trained length are ones the model never saw. */
static void check_ctx(const struct session_opts *o, const struct session *s) {
    int trained = moex_model_n_ctx_train(s->mm), n_ctx = moex_n_ctx(s->mc);
    if (trained <= 0 || n_ctx <= trained) return;
    if (o->given & SESSION_GIVEN_CTX)
        fprintf(stderr, "moex: note: --ctx %d is above the %d tokens the model was trained for; output past them may "
                        "be poor\n", n_ctx, trained);
    else
        fprintf(stderr, "moex: note: the %d tokens are more than the %d the model was trained for; output past them "
                        "may be poor\n", n_ctx, trained);
}

void session_model_params(const struct session_opts *o, struct moex_model_params *mp) {
    moex_model_params_default(mp);
    mp->path = o->model_path;
    mp->n_threads = o->threads;
    mp->pin_threads = o->pin;
    mp->no_interleave = o->no_interleave;
    mp->device = o->experts;
    mp->log = session_log;
    mp->progress = session_progress;
}

void session_context_params(const struct session_opts *o, struct moex_context_params *cp) {
    moex_context_params_default(cp);
    cp->n_ctx = o->n_ctx;
    cp->n_batch = o->n_batch;
    cp->kv_f32 = o->kv_f32;
    cp->trace = o->trace_path != NULL;
}

void session_log(void *user, enum moex_log_level level, const char *message) {
    (void)user;
    fprintf(stderr, "moex: %s%s\n", level == MOEX_LOG_NOTE ? "note: " : "", message);
}

void session_progress(void *user, const char *label, uint64_t done, uint64_t total) {
    static struct progress bar; /* one start-up at a time: the tools are single-threaded there */
    (void)user;
    progress_report(&bar, label, done, total);
}

const char *session_model_path(const struct session_opts *o) {
    if (o->model_path) return o->model_path;
    const char *path = default_model_path();
    struct stat st;
    if (stat(path, &st) != 0 && make_default_model(path) != 0) return NULL;
    return path;
}

int session_open(struct session *s, const struct session_opts *o) {
    memset(s, 0, sizeof *s);
    struct session_opts finished;
    if (!o->finished) { /* a caller that forgot: the environment still counts */
        finished = *o;
        if (session_opts_finish(&finished)) return 2;
        o = &finished;
    }
    note_unused(o);
    /* The output is opened first: a bad path fails now, not after the run. */
    int refused = outputs_check_session(o, "--trace", o->trace_path);
    if (refused) return refused;
    if (o->trace_path && !(s->trace_file = moex_file_create(o->trace_path))) {
        cli_fail("%s", moex_last_error());
        return 1;
    }
    struct moex_model_params mp;
    struct moex_context_params cp;
    session_model_params(o, &mp);
    session_context_params(o, &cp);
    if (!(mp.path = session_model_path(o))) {
        session_close(s);
        return 1;
    }
    int64_t t0 = cli_time_ns();
    s->mm = moex_model_load(&mp);
    int64_t t_model = cli_time_ns();
    if (!s->mm) {
        cli_fail("%s", moex_last_error());
        session_close(s);
        return 1;
    }
    s->profile = o->profile;
    s->trace_path = o->trace_path;
    if (!(s->mc = moex_context_new(s->mm, &cp))) {
        cli_fail("%s", moex_last_error());
        session_close(s);
        return 1;
    }
    check_ctx(o, s);
    if (o->profile) {
        fprintf(stderr, "moex profile: start-up %.1f ms: model %.1f ms, context and device %.1f ms\n",
                (cli_time_ns() - t0) / 1e6, (t_model - t0) / 1e6, (cli_time_ns() - t_model) / 1e6);
        struct moex_memory mem;
        moex_context_memory(s->mc, &mem);
        fprintf(stderr, "moex profile: context of %d tokens: KV cache %.1f MiB, conv state %.2f MiB, recurrent state "
                "%.2f MiB, checkpoint %.2f MiB, scratch %.1f MiB\n", moex_n_ctx(s->mc), mem.kv / 1048576.0,
                mem.conv / 1048576.0, mem.recurrent / 1048576.0, mem.checkpoint / 1048576.0, mem.scratch / 1048576.0);
        fprintf(stderr, "moex profile: CPU kernels %s, interleaved weights %.1f MiB\n", moex_isa(),
                mem.interleaved / 1048576.0);
    }
    return 0;
}

int session_close(struct session *s) {
    int rc = 0;
    if (s->mc) {
        char *profile = s->profile ? moex_context_profile_text(s->mc) : NULL;
        if (profile) fputs(profile, stderr);
        else if (s->profile) rc = cli_fail("%s", moex_last_error());
        else if (moex_context_note(s->mc)[0]) fprintf(stderr, "moex: note: %s\n", moex_context_note(s->mc));
        free(profile);
    }
    if (s->trace_file && s->mc) {
        moex_file *f = s->trace_file;
        s->trace_file = NULL;
        if (moex_context_write_trace_file(s->mc, f) != 0) rc = cli_fail("%s", moex_last_error());
        else fprintf(stderr, "moex: wrote the timeline to %s\n", s->trace_path);
    }
    moex_file_discard(s->trace_file);
    moex_context_free(s->mc);
    moex_model_free(s->mm);
    memset(s, 0, sizeof *s);
    return rc;
}
