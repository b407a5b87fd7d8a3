/* moex serve: an OpenAI-compatible HTTP server (src/serve/). */
#include "cli.h"
#include "session.h"

#ifdef MOEX_HAVE_HTTP
#include "serve/serve.h"
#endif

#include <signal.h>
#include <stdio.h>
#include <string.h>

#ifdef MOEX_HAVE_HTTP
static void help(FILE *out) {
    fprintf(out,
            "usage: moex serve [-m MODEL] [--host ADDR] [--port N] [--parallel N] [options]\n"
            "Serves the model over HTTP, OpenAI style: POST /v1/chat/completions and\n"
            "/v1/completions (stream: true for server-sent events), GET /v1/models and\n"
            "/v1/models/ID, /health, /metrics (Prometheus); llama-server's POST /tokenize,\n"
            "/detokenize, GET /props, /slots; a chat page at /. Runs until SIGINT or\n"
            "SIGTERM, which lets every open request end (a stream with an error event).\n"
            "Requests get one of --parallel slots, each a sequence of --ctx tokens in one\n"
            "shared context; each step batches every active slot's next token (and up to\n"
            "128 prompt tokens of slots in prefill, 512 while no slot decodes) into one\n"
            "forward pass (continuous batching), so that several clients share each\n"
            "read of the weights.\n\n"
            "      --host ADDR            IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
            "      --port N               port; 0 = any free one, said at start (default 8080)\n"
            "      --parallel N           slots (default 1)\n"
            "      --api-key KEY          require Authorization: Bearer KEY (not on /health)\n"
            "      --alias NAME           the model's id in responses (default: its general.name)\n"
            "      --cors ORIGIN          answer browsers of ORIGIN (\"*\": any) with CORS headers\n"
            "      --reasoning-format F   deepseek: a <think> block as reasoning_content (default);\n"
            "                             none: kept in content (a request's reasoning_format wins)\n"
            "      --quiet                no line per request on stderr\n"
            "Bounds (over them: a 4xx answer in the OpenAI error shape):\n"
            "      --max-body BYTES       request body (default %u; 413)\n"
            "      --max-prompt-tokens N  prompt tokens, and at most --ctx (default %d; 400)\n"
            "      --max-tokens N         most max_tokens a request may ask, and its default (default %d; 400)\n"
            "      --max-header-bytes N   all header names and values (default %d; 431)\n"
            "      --max-headers N        headers per request (default %d; 431)\n"
            "      --max-connections N    requests served at a time (default %d; more get 503)\n"
            "      --request-timeout S    a request's head and body must arrive within S\n"
            "                             seconds (default %d; 408)\n"
            "      --idle-timeout S       close a connection silent for S seconds (default %d)\n"
            "      --timeout S            end a request's generation S seconds after it came,\n"
            "                             finish_reason \"length\"; 0 = never (default %d)\n"
            "Sampling: a request's temperature, top_p, top_k, min_p and repeat_penalty default\n"
            "to moex run's, so that the same settings and seed give the same tokens; a request\n"
            "without a seed gets a random one, named in the response's \"seed\".\n"
            "docs/serve.md lists every field, endpoint and error.\n\n",
            SERVE_DEFAULT_MAX_BODY, SERVE_DEFAULT_MAX_PROMPT_TOKENS, SERVE_DEFAULT_MAX_TOKENS,
            SERVE_DEFAULT_MAX_HEADER_BYTES, SERVE_DEFAULT_MAX_HEADERS, SERVE_DEFAULT_MAX_CONNECTIONS,
            SERVE_DEFAULT_REQUEST_TIMEOUT_S, SERVE_DEFAULT_IDLE_TIMEOUT_S, SERVE_DEFAULT_TOTAL_TIMEOUT_S);
    session_opts_help_with(out, &(struct session_help){ .groups = SESSION_CONTEXT | SESSION_RUNTIME });
}

static int parse_serve(struct serve_options *o, int argc, char **argv, int *i) {
    static const struct { const char *flag; int64_t min, max; } ints[] = {
        { "--port", 0, 65535 },           { "--parallel", 1, 256 },        { "--max-body", 1, 1 << 30 },
        { "--max-prompt-tokens", 1, 1 << 20 }, { "--max-tokens", 1, 1 << 20 }, { "--max-header-bytes", 64, 1 << 20 },
        { "--max-headers", 1, 10000 },    { "--max-connections", 1, 10000 }, { "--idle-timeout", 1, 86400 },
        { "--timeout", 0, 86400 * 7 },   { "--request-timeout", 1, 3600 },
    };
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--host")) {
        if (!(o->host = cli_value(argc, argv, i))) return -1;
        return 1;
    }
    if (!strcmp(a, "--api-key")) {
        if (!(o->api_key = cli_value(argc, argv, i))) return -1;
        return 1;
    }
    if (!strcmp(a, "--alias")) {
        if (!(o->model_id = cli_value(argc, argv, i))) return -1;
        return 1;
    }
    if (!strcmp(a, "--cors")) {
        if (!(o->cors_origin = cli_value(argc, argv, i))) return -1;
        if (!o->cors_origin[0] || strpbrk(o->cors_origin, "\r\n"))
            return cli_usage("serve", "--cors: invalid value '%s' (expected an origin or *)", o->cors_origin), -1;
        return 1;
    }
    if (!strcmp(a, "--reasoning-format")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (strcmp(v, "none") && strcmp(v, "deepseek"))
            return cli_usage("serve", "--reasoning-format: invalid value '%s' (expected none or deepseek)", v), -1;
        o->reasoning_inline = !strcmp(v, "none");
        return 1;
    }
    if (!strcmp(a, "--quiet")) {
        o->quiet = true;
        return 1;
    }
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        if (strcmp(a, ints[k].flag)) continue;
        int64_t n;
        if (!(v = cli_value(argc, argv, i)) || cli_parse_int(a, v, ints[k].min, ints[k].max, &n)) return -1;
        struct serve_limits *l = &o->limits;
        switch (k) {
        case 0: o->port = (int)n; break;
        case 1: o->parallel = (int)n; break;
        case 2: l->max_body = (size_t)n; break;
        case 3: l->max_prompt_tokens = (int)n; break;
        case 4: l->max_tokens = (int)n; break;
        case 5: l->max_header_bytes = (size_t)n; break;
        case 6: l->max_headers = (int)n; break;
        case 7: l->max_connections = (int)n; break;
        case 8: l->idle_timeout_s = (int)n; break;
        case 9: l->total_timeout_s = (int)n; break;
        default: l->request_timeout_s = (int)n; break;
        }
        return 1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv) {
    struct session_opts so;
    struct serve_options o;
    session_opts_defaults(&so);
    so.groups = SESSION_CONTEXT | SESSION_RUNTIME; /* no --profile or --trace: a server has no end to report at */
    serve_options_default(&o);
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (!r) r = parse_serve(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (cli_is_help(argv[i])) { help(stdout); return 0; }
        return cli_usage("serve", "unknown option '%s'", argv[i]);
    }
    if (session_opts_finish(&so)) return 2;
    char why[512];
    if (serve_check_options(&o, why, sizeof why)) return cli_fail("%s", why), 2;
    struct moex_model_params mp;
    session_model_params(&so, &mp);
    session_context_params(&so, &o.ctx);
    o.ctx.trace = false;
    if (!(mp.path = session_model_path(&so))) return 1;
    /* The signals are taken here, by sigwait: every thread started after this blocks them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Listening first: /health says "loading" while the model loads. */
    struct server *s = serve_start(&o, why, sizeof why);
    if (!s) return cli_fail("serve: %s", why), 1;
    bool v6 = strchr(o.host, ':') && o.host[0] != '[';
    char where[128];
    snprintf(where, sizeof where, "http://%s%s%s:%d", v6 ? "[" : "", o.host, v6 ? "]" : "", serve_port(s));
    fprintf(stderr, "moex serve: listening on %s, loading %s\n", where, mp.path);
    fflush(stderr);
    moex_model *m = moex_model_load(&mp);
    if (!m || !moex_model_has_tokenizer(m)) {
        if (m) cli_fail("serve: -m %s: the model has no tokenizer", mp.path);
        else cli_fail("%s", moex_last_error());
        serve_stop(s);
        moex_model_free(m);
        return m ? 2 : 1;
    }
    if (serve_load(s, m, why, sizeof why)) {
        cli_fail("serve: %s", why);
        serve_stop(s);
        moex_model_free(m);
        return 1;
    }
    if (o.model_id) fprintf(stderr, "moex serve: %s as \"%s\" on %s/v1", moex_model_name(m), o.model_id, where);
    else fprintf(stderr, "moex serve: %s on %s/v1", moex_model_name(m), where);
    fprintf(stderr, " (%d slot%s of %d tokens, batched)\n", o.parallel, o.parallel == 1 ? "" : "s", serve_n_ctx(s));
    fflush(stderr);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "moex serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_stop(s);
    moex_model_free(m);
    return 0;
}
#else
int cmd_serve(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            printf("usage: moex serve [options]\nThis moex was built without HTTP support: install libmicrohttpd-dev "
                   "and libcjson-dev and build again.\n");
            return 0;
        }
    return cli_fail("serve: this moex was built without HTTP support (libmicrohttpd and cJSON were not found at build "
                    "time; install libmicrohttpd-dev and libcjson-dev and build again)");
}
#endif
