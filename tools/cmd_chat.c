/* moex chat: interactive multi-turn chat in the model's ChatML template. The
 * conversation stays in the context: each turn only the tokens that differ
 * from what it holds are evaluated. */
#include "cli.h"
#include "generate.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex chat [-m MODEL] [-sys TEXT] [--no-think] [options]\n"
            "Reads one user message per line from standard input and streams the\n"
            "model's replies (a line of any length is one message). Empty line: ignored;\n"
            "/exit or end of input: quit; /reset: start a new conversation.\n\n"
            "  -sys, --system-prompt TEXT  system prompt (--system TEXT: the same)\n"
            "  -e, --escape          turn \\n, \\t, \\\\, \\xHH... in the system prompt into the\n"
            "                        characters they name (default, as llama.cpp)\n"
            "      --no-escape       take the system prompt as typed\n"
            "      --no-think        Qwen3: ask for replies without a thinking block\n"
            "  -n, --n-predict N     most tokens per reply (default 1024); -1: until an end of\n"
            "                        generation or a full context\n");
    sampler_opts_help(out);
    session_opts_help(out);
}

/* The conversation's messages; their contents are owned. */
struct conversation {
    struct moex_chat_message *msgs;
    int n, cap;
};

static int conversation_add(struct conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        struct moex_chat_message *g = realloc(c->msgs, sizeof *g * (size_t)cap);
        if (!g) return -1;
        c->msgs = g;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, content, len);
    copy[len] = 0;
    c->msgs[c->n++] = (struct moex_chat_message){ role, copy };
    return 0;
}

static void conversation_clear(struct conversation *c) {
    for (int i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
    c->n = 0;
}

/* Where the conversation's generation prompt begins in its tokens all[0..n),
 * or 0 when the text before it does not tokenize to a prefix of them. */
static int generation_start(const moex_model *m, const struct conversation *c, bool think, const int32_t *all, int n) {
    size_t len = 0;
    char *head = moex_chat_apply(m, c->msgs, c->n, false, think, &len);
    int n_head = 0;
    int32_t *ids = head ? moex_tokenize_alloc(m, head, len, false, true, &n_head) : NULL;
    bool prefix = ids && n_head < n && !memcmp(ids, all, sizeof *all * (size_t)n_head);
    free(head);
    free(ids);
    return prefix ? n_head : 0;
}

int cmd_chat(int argc, char **argv) {
    struct session_opts so;
    struct sampler_opts sm;
    session_opts_defaults(&so);
    sampler_opts_defaults(&sm);
    const char *system = NULL;
    bool think = true, escape = true;
    int64_t n_predict = 1024;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (!r) r = sampler_opts_parse(&sm, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v;
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-sys") || !strcmp(a, "--system-prompt") || !strcmp(a, "--system")) {
            if (!(system = cli_value(argc, argv, &i))) return 2;
        }
        else if (!strcmp(a, "-e") || !strcmp(a, "--escape")) escape = true;
        else if (!strcmp(a, "--no-escape")) escape = false;
        else if (!strcmp(a, "--no-think")) think = false;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = cli_value(argc, argv, &i)) || parse_n_predict(v, 1, &n_predict)) return 2;
        } else return cli_usage("chat", "unknown option '%s'", a);
    }
    if (session_opts_finish(&so)) return 2;
    char *system_text = system ? strdup(system) : NULL;
    if (system && !system_text) return cli_fail("out of memory");
    if (system_text && escape) text_unescape(system_text);
    system = system_text;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) { free(system_text); return opened; }
    if (n_predict > moex_n_ctx(s.mc)) n_predict = moex_n_ctx(s.mc);
    sampler_opts_finish(&sm); /* the seed is said after the start-up's notes */
    int rc = 1;
    if (!moex_model_has_tokenizer(s.mm)) {
        cli_fail("chat: -m %s: the model has no tokenizer", so.model_path ? so.model_path : default_model_path());
        session_close(&s);
        free(system_text);
        return 2;
    }
    if (!moex_chat_template_known(s.mm))
        fprintf(stderr, "moex: the model's chat template is not one moex renders; using ChatML\n");
    moex_sampler *smp = moex_sampler_new(s.mm, &sm.params);
    int32_t *reply_ids = malloc(sizeof *reply_ids * (size_t)n_predict);
    struct conversation conv = { 0 };
    char *line = NULL; /* one message, however long: a line is one user turn */
    size_t line_cap = 0;
    bool tty = isatty(0);
    if (!smp || !reply_ids) { cli_fail("out of memory"); goto done; }
    for (;;) {
        if (tty) { fputs("> ", stdout); fflush(stdout); }
        ssize_t line_len = getline(&line, &line_cap, stdin);
        if (line_len < 0) break;
        if (memchr(line, 0, (size_t)line_len)) {
            fprintf(stderr, "moex: the message holds a NUL byte; it is ignored\n");
            continue;
        }
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conversation_clear(&conv);
            moex_truncate(s.mc, 0);
            continue;
        }
        if ((conv.n == 0 && system && conversation_add(&conv, "system", system, strlen(system))) ||
            conversation_add(&conv, "user", line, strlen(line))) { cli_fail("out of memory"); goto done; }
        size_t text_len = 0;
        char *text = moex_chat_apply(s.mm, conv.msgs, conv.n, true, think, &text_len);
        int n_all = 0;
        int32_t *all = text ? moex_tokenize_alloc(s.mm, text, text_len, false, true, &n_all) : NULL;
        free(text);
        if (!all) { cli_fail("%s", moex_last_error()); goto done; }
        if (n_all > moex_n_ctx(s.mc)) {
            fprintf(stderr, "moex: the conversation exceeds the context (%d tokens); use /reset\n", moex_n_ctx(s.mc));
            free(all);
            free((char *)conv.msgs[--conv.n].content);
            continue;
        }
        /* The context keeps what it shares with the conversation: only the
         * new turn is evaluated. Recurrent state cannot be cut back, so it is
         * checkpointed where the generation prompt begins, which the next
         * turn's text keeps (the reply is rewritten after it). generate()
         * stops where the context is full and says so: the token sampled
         * from the last position still fits in the reply. */
        struct moex_generate_result r;
        int grc = generate(&s, smp, all, n_all, generation_start(s.mm, &conv, think, all, n_all), (int)n_predict,
                           false, stdout, NULL, reply_ids, &r);
        free(all);
        if (grc != 0) goto done;
        size_t reply_len = 0;
        int n_text = r.finish == MOEX_FINISH_EOG ? r.n_generated - 1 : r.n_generated;
        char *reply = moex_detokenize(s.mm, reply_ids, n_text, &reply_len);
        /* The reply's newline reaches a pipe before the stats line does. */
        fputc('\n', stdout);
        fflush(stdout);
        generate_report(stderr, "new prompt", &r);
        int arc = reply ? conversation_add(&conv, "assistant", reply, reply_len) : -1;
        free(reply);
        if (arc != 0) { cli_fail("%s", moex_last_error()); goto done; }
    }
    rc = 0;
done:
    free(line);
    free(system_text);
    conversation_clear(&conv);
    free(conv.msgs);
    free(reply_ids);
    moex_sampler_free(smp);
    if (session_close(&s)) rc = 1;
    return rc;
}
