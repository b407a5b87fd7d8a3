/* moex probe: the CPU quantized path against a device with resident W8A8
 * weights, per expert shape and rows M (moex_probe); the report on stdout. */
#include "cli.h"

#include "moex_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex probe [--device cpu|amx|sim|rknpu|cuda] [--shape KxN ...] [--m 1,8,16,32,64,128] [-t N]\n"
            "       moex probe --dump-program M,K,N   the rknpu device's programs for one matmul, decoded\n"
            "For each weight shape (K inputs x N outputs, a Q4_K weight) and each number of\n"
            "rows M, times the CPU path (Q4_K weights, activations quantized to Q8_K once)\n"
            "and the device with the weight resident (activations quantized to int8 once),\n"
            "marks where the device starts to win, and measures packing (GB/s of Q4_K read)\n"
            "next to the machine's memory read bandwidth. Device times on sim are modelled.\n\n"
            "  --device NAME    cpu, amx, sim or cuda (default: amx where present, else sim);\n"
            "                   cuda: the GPU, host<->device bandwidth, GEMV/GEMM rates on Q4_K\n"
            "  --shape KxN      a weight shape; repeat for more (default 2048x768 768x2048,\n"
            "                   the Qwen3-30B-A3B expert gate/up and down); K a multiple of 256\n"
            "  --m LIST         rows to try (default 1,8,16,32,64,128)\n"
            "  -t, --threads N  threads (default: one per physical core)\n"
            "  --sim-preset P   sim preset (rk3588, the default)\n"
            "  --sim SPEC       sim figures: [rk3588,]key=value,... (--sim-help lists them)\n"
            "  --rknpu OPTS     rknpu device options: fake=rocket|rknpu, cores=N, domains=N (docs/rknpu.md)\n"
            "  --no-pack-types  skip the table of host packing per source type\n");
}

static int parse_shape(const char *s, struct moex_probe_shape *out) {
    char *x = strchr(s, 'x');
    if (!x) return cli_fail("--shape: invalid value '%s' (expected KxN, e.g. 2048x768)", s), -1;
    char k[32];
    size_t len = (size_t)(x - s);
    if (len == 0 || len >= sizeof k) return cli_fail("--shape: invalid value '%s'", s), -1;
    memcpy(k, s, len);
    k[len] = 0;
    int64_t K, N;
    if (cli_parse_int("--shape K", k, 256, 32768, &K) || cli_parse_int("--shape N", x + 1, 1, 1 << 20, &N)) return -1;
    if (K % 256) return cli_fail("--shape: K = %lld is not a multiple of 256 (a Q4_K block)", (long long)K), -1;
    out->K = (int)K;
    out->N = (int)N;
    return 0;
}

static void write_stdout(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
}

int cmd_probe(int argc, char **argv) {
    const char *device = NULL, *m_list = "1,8,16,32,64,128", *sim = NULL, *preset = "rk3588", *rknpu = NULL;
    bool pack_types = true;
    struct moex_probe_shape shapes[16];
    int n_shapes = 0;
    int64_t threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--sim-help")) {
            printf("sim figures (rk3588 preset; override with --sim rk3588,key=value,...):\n%s", moex_sim_figures_help());
            return 0;
        } else if (!strcmp(a, "--device")) {
            if (!(device = cli_value(argc, argv, &i))) return 2;
            struct moex_device_desc desc;
            if (moex_device_describe(device, &desc) != 0 || !desc.offloads)
                return cli_fail("--device: invalid value '%s' (expected a device: one of %s but none)", device,
                                moex_device_names()), 2;
        } else if (!strcmp(a, "--rknpu")) {
            if (!(rknpu = cli_value(argc, argv, &i))) return 2;
            if (moex_check_rknpu_options(rknpu)) return cli_fail("--rknpu: %s", moex_last_error()), 2;
        } else if (!strcmp(a, "--dump-program")) {
            int64_t *mkn = NULL;
            if (!(v = cli_value(argc, argv, &i))) return 2;
            if (cli_parse_int_list("--dump-program", v, 1, 1 << 20, &mkn) != 3) {
                free(mkn);
                return cli_fail("--dump-program: invalid value '%s' (expected M,K,N)", v), 2;
            }
            int rc = moex_rknpu_program((int)mkn[0], (int)mkn[1], (int)mkn[2], write_stdout, NULL);
            free(mkn);
            if (rc != 0) return cli_fail("--dump-program: %s", moex_last_error()), 2;
            return 0;
        } else if (!strcmp(a, "--shape")) {
            if (!(v = cli_value(argc, argv, &i))) return 2;
            if (n_shapes == 16) return cli_fail("--shape: at most 16 shapes"), 2;
            if (parse_shape(v, &shapes[n_shapes])) return 2;
            n_shapes++;
        } else if (!strcmp(a, "--m")) {
            if (!(m_list = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--threads", v, 1, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--sim")) {
            if (!(sim = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--sim-preset")) {
            if (!(preset = cli_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--no-pack-types")) {
            pack_types = false;
        } else {
            return cli_usage("probe", "unknown option '%s'", a);
        }
    }
    if (cli_check_env(NULL)) return 2;
    /* --sim may name its preset itself ("rk3588,cores=2"); else --sim-preset's */
    char sim_spec[512];
    const char *eq = sim ? strchr(sim, '=') : NULL, *comma = sim ? strchr(sim, ',') : NULL;
    bool own_preset = sim && (!eq || (comma && comma < eq));
    if (own_preset) snprintf(sim_spec, sizeof sim_spec, "%s", sim);
    else snprintf(sim_spec, sizeof sim_spec, "%s%s%s", preset, sim ? "," : "", sim ? sim : "");
    if (moex_check_sim_figures(preset) != 0 || strchr(preset, '=') || strchr(preset, ','))
        return cli_fail("--sim-preset: invalid value '%s' (expected rk3588)", preset), 2;
    if (sim && cli_check_sim("--sim", sim, sim_spec)) return 2;
    int64_t *ms = NULL;
    int n_m = cli_parse_int_list("--m", m_list, 1, 4096, &ms);
    if (n_m < 0) return 2;
    int *rows = malloc(sizeof *rows * (size_t)n_m);
    if (!rows) { free(ms); return cli_fail("out of memory"); }
    for (int i = 0; i < n_m; i++) rows[i] = (int)ms[i];
    free(ms);
    /* a device whose own options are --rknpu's gets them instead of the sim's figures */
    struct moex_device_desc desc;
    if (device && moex_device_describe(device, &desc) == 0 && desc.figures_option &&
        !strcmp(desc.figures_option, "--rknpu"))
        snprintf(sim_spec, sizeof sim_spec, "%s", rknpu ? rknpu : "");
    struct moex_probe_params p = { device, shapes, n_shapes, rows, n_m, (int)threads, sim_spec, !pack_types,
                                   write_stdout, NULL };
    int rc = moex_probe(&p);
    free(rows);
    if (rc == -2) return cli_fail("--shape: invalid value %s", moex_last_error()), 2;
    if (rc != 0) return cli_fail("%s", moex_last_error());
    return 0;
}
