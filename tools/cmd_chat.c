/* moex chat: interactive multi-turn chat in the model's chat template, as
 * llama-cli's conversation mode: a line editor on a terminal (lineedit.c),
 * Ctrl-C to stop a reply, /commands, and a context that drops the oldest
 * turns when it fills. The conversation stays in the context: each turn only
 * the tokens that differ from what it holds are evaluated. */
#include "cli.h"
#include "generate.h"
#include "lineedit.h"
#include "session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAVE_HEADER "moex chat 1"

static void help(FILE *out) {
    fprintf(out,
            "usage: moex chat [-m MODEL] [-sys TEXT] [--no-think] [options]\n"
            "Reads one user message per line and streams the model's replies (a line of any\n"
            "length is one message). On a terminal the line can be edited (arrows, Home/End,\n"
            "Ctrl-A/E, backspace, Ctrl-U/K) and Up/Down browse the earlier lines; elsewhere\n"
            "lines are read as they come. Ctrl-C stops a reply and returns to the prompt; a\n"
            "second Ctrl-C at an empty prompt, /exit or end of input (Ctrl-D) quits. When\n"
            "the conversation outgrows the context, its oldest turns are dropped (the system\n"
            "prompt stays). Empty lines are ignored; /help lists the commands.\n\n"
            "  -sys, --system-prompt TEXT  system prompt (--system TEXT: the same)\n"
            "  -e, --escape          turn \\n, \\t, \\\\, \\xHH... in the system prompt into the\n"
            "                        characters they name (default, as llama.cpp)\n"
            "      --no-escape       take the system prompt as typed\n"
            "      --no-think        Qwen3: ask for replies without a thinking block\n"
            "  -n, --n-predict N     most tokens per reply (default 1024); -1: until an end of\n"
            "                        generation or a full context\n"
            "      --ignore-eos      do not end a reply at end-of-generation tokens\n");
    sampler_opts_help(out);
    session_opts_help(out);
}

static void commands_help(FILE *out) {
    fprintf(out,
            "  /help         this list\n"
            "  /reset        start a new conversation (the system prompt stays)\n"
            "  /save FILE    write the conversation to FILE: a line '" SAVE_HEADER "', then one\n"
            "                line per message, 'ROLE TEXT' (newlines in TEXT as \\n, backslashes as \\\\)\n"
            "  /load FILE    replace the conversation with the one in FILE (from /save)\n"
            "  /exit         quit (also /quit, Ctrl-D, or Ctrl-C twice at an empty prompt)\n");
}

/* The conversation's messages; their roles and contents are owned. */
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
    char *copy = malloc(len + 1), *role_copy = strdup(role);
    if (!copy || !role_copy) { free(copy); free(role_copy); return -1; }
    memcpy(copy, content, len);
    copy[len] = 0;
    c->msgs[c->n++] = (struct moex_chat_message){ role_copy, copy };
    return 0;
}

static void conversation_drop(struct conversation *c, int from, int count) {
    for (int i = from; i < from + count; i++) {
        free((char *)c->msgs[i].role);
        free((char *)c->msgs[i].content);
    }
    if (c->n - from - count > 0)
        memmove(c->msgs + from, c->msgs + from + count, sizeof *c->msgs * (size_t)(c->n - from - count));
    c->n -= count;
}

static void conversation_clear(struct conversation *c) { conversation_drop(c, 0, c->n); }

/* /save: a header line, then "ROLE CONTENT" per message, the content with
 * backslash, newline and carriage return escaped (\\, \n, \r). */
static int conversation_save(const struct conversation *c, const char *path) {
    moex_file *f = moex_file_create(path);
    if (!f) return cli_fail("/save: %s", moex_last_error()), -1;
    int rc = moex_file_write(f, SAVE_HEADER "\n", strlen(SAVE_HEADER) + 1);
    for (int i = 0; i < c->n && rc == 0; i++) {
        const char *s = c->msgs[i].content;
        char *line = malloc(strlen(c->msgs[i].role) + 2 * strlen(s) + 3), *o = line;
        if (!line) { moex_file_discard(f); return cli_fail("out of memory"), -1; }
        o += sprintf(o, "%s ", c->msgs[i].role);
        for (; *s; s++) {
            if (*s == '\\') { *o++ = '\\'; *o++ = '\\'; }
            else if (*s == '\n') { *o++ = '\\'; *o++ = 'n'; }
            else if (*s == '\r') { *o++ = '\\'; *o++ = 'r'; }
            else *o++ = *s;
        }
        *o++ = '\n';
        rc = moex_file_write(f, line, (size_t)(o - line));
        free(line);
    }
    if (rc) { moex_file_discard(f); return cli_fail("/save: %s", moex_last_error()), -1; }
    if (moex_file_commit(f)) return cli_fail("/save: %s", moex_last_error()), -1;
    return 0;
}

static bool known_role(const char *r) {
    return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "tool");
}

/* /load: the file of /save into *c (left as it was on failure). */
static int conversation_load(struct conversation *c, const char *path) {
    char *text;
    size_t len;
    if (cli_read_input("/load", path, &text, &len)) return -1;
    struct conversation loaded = { 0 };
    int rc = 0, line_no = 1;
    char *p = text, *nl = strchr(p, '\n');
    if (memchr(text, 0, len) || !nl || (size_t)(nl - p) != strlen(SAVE_HEADER) || memcmp(p, SAVE_HEADER, (size_t)(nl - p)))
        rc = cli_fail("/load %s: not a conversation saved by moex chat (no '" SAVE_HEADER "' line)", path);
    for (p = nl ? nl + 1 : p; rc == 0 && *p; p = nl ? nl + 1 : p + strlen(p)) {
        line_no++;
        nl = strchr(p, '\n');
        if (nl) *nl = 0;
        char *space = strchr(p, ' ');
        if (space) *space = 0;
        if (!space || !known_role(p)) {
            rc = cli_fail("/load %s: line %d: expected 'ROLE TEXT' with ROLE system, user, assistant or tool", path, line_no);
            break;
        }
        char *o = space + 1;
        for (const char *s = space + 1; *s; s++) {
            if (*s != '\\' || !s[1]) { *o++ = *s; continue; }
            s++;
            *o++ = *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
        }
        if (conversation_add(&loaded, p, space + 1, (size_t)(o - (space + 1)))) rc = cli_fail("out of memory");
    }
    free(text);
    if (rc) {
        conversation_clear(&loaded);
        free(loaded.msgs);
        return -1;
    }
    conversation_clear(c);
    free(c->msgs);
    *c = loaded;
    return 0;
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

static int32_t *render(const moex_model *m, const struct conversation *c, bool think, int *n) {
    size_t len = 0;
    char *text = moex_chat_apply(m, c->msgs, c->n, true, think, &len);
    int32_t *ids = text ? moex_tokenize_alloc(m, text, len, false, true, n) : NULL;
    free(text);
    if (!ids) cli_fail("%s", moex_last_error());
    return ids;
}

/* The conversation's tokens with room for `reserve` of reply: the oldest
 * turns after the system prompt are dropped until they fit (said once per
 * shift). NULL when the last message alone does not fit (said), or on error. */
static int32_t *fit_context(const moex_model *m, struct conversation *c, bool think, int n_ctx, int reserve, int *n) {
    int dropped = 0;
    for (;;) {
        int32_t *ids = render(m, c, think, n);
        if (!ids) return NULL;
        int first = c->n && !strcmp(c->msgs[0].role, "system") ? 1 : 0;
        if (*n + reserve <= n_ctx || (*n <= n_ctx && first >= c->n - 1)) {
            if (dropped)
                fprintf(stderr, "moex: the context is full: the %d oldest message%s dropped%s\n", dropped,
                        dropped == 1 ? " is" : "s are", first ? " (the system prompt stays)" : "");
            return ids;
        }
        free(ids);
        if (first >= c->n - 1) {
            fprintf(stderr, "moex: the message exceeds the context (%d tokens of %d); it is dropped\n", *n, n_ctx);
            return NULL;
        }
        /* the oldest turn: a message and the replies up to the next user message */
        int count = 1;
        while (first + count < c->n - 1 && strcmp(c->msgs[first + count].role, "user")) count++;
        conversation_drop(c, first, count);
        dropped += count;
    }
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

/* What one input line asks: a reply (0), nothing more (1), quitting (2), or an error (-1). */
static int command(struct session *s, struct conversation *conv, const char *system, const char *line) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 2;
    if (!strcmp(line, "/help")) { commands_help(stdout); fflush(stdout); return 1; }
    if (!strcmp(line, "/reset")) {
        conversation_clear(conv);
        if (system && conversation_add(conv, "system", system, strlen(system))) return cli_fail("out of memory"), -1;
        moex_truncate(s->mc, 0);
        fprintf(stderr, "moex: a new conversation\n");
        return 1;
    }
    bool save = !strncmp(line, "/save", 5), load = !strncmp(line, "/load", 5);
    if ((save || load) && (line[5] == ' ' || !line[5])) {
        const char *path = line + 5 + strspn(line + 5, " ");
        if (!*path) fprintf(stderr, "moex: %s needs a file name\n", save ? "/save" : "/load");
        else if (save && conversation_save(conv, path) == 0)
            fprintf(stderr, "moex: saved %d message%s to %s\n", conv->n, conv->n == 1 ? "" : "s", path);
        else if (load && conversation_load(conv, path) == 0)
            fprintf(stderr, "moex: loaded %d message%s from %s\n", conv->n, conv->n == 1 ? "" : "s", path);
        return 1;
    }
    return 0;
}

int cmd_chat(int argc, char **argv) {
    struct session_opts so;
    struct sampler_opts sm;
    session_opts_defaults(&so);
    sampler_opts_defaults(&sm);
    const char *system = NULL;
    bool think = true, escape = true, ignore_eos = false;
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
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
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
    int rc = 1, n_ctx = moex_n_ctx(s.mc);
    if (n_predict > n_ctx) n_predict = n_ctx;
    sampler_opts_finish(&sm); /* the seed is said after the start-up's notes */
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
    struct lineedit *le = lineedit_new(STDIN_FILENO, stdout);
    /* Ctrl-C stops a reply (and a read from a pipe) instead of the program:
     * while reading, the read is interrupted; while replying, the writes and
     * waits go on (SA_RESTART) and the next token stops. */
    struct sigaction on_int = { .sa_handler = on_interrupt }, on_int_replying, before;
    sigemptyset(&on_int.sa_mask);
    on_int_replying = on_int;
    on_int_replying.sa_flags = SA_RESTART;
    sigaction(SIGINT, &on_int, &before);
    generate_stop_on(&interrupted);
    bool ctrl_c_before = false; /* the last thing was a Ctrl-C: one more at an empty prompt quits */
    int reserve = (int)(n_predict < n_ctx / 4 ? n_predict : n_ctx / 4);
    if (reserve < 1) reserve = 1;
    if (!smp || !reply_ids || !le || (system && conversation_add(&conv, "system", system, strlen(system)))) {
        cli_fail("out of memory");
        goto done;
    }
    for (;;) {
        char *line;
        size_t line_len;
        enum lineedit_status st = lineedit_read(le, "> ", &line, &line_len);
        if (st == LINEEDIT_ERROR) { cli_fail("chat: cannot read the input: %s", strerror(errno)); goto done; }
        if (st == LINEEDIT_EOF) break;
        if (st == LINEEDIT_INTERRUPT || interrupted) {
            interrupted = 0;
            if (line_len) { ctrl_c_before = false; continue; } /* the line typed so far is dropped */
            if (ctrl_c_before) break;
            ctrl_c_before = true;
            fprintf(stderr, "moex: Ctrl-C again at an empty prompt, /exit or Ctrl-D quits\n");
            continue;
        }
        ctrl_c_before = false;
        if (memchr(line, 0, line_len)) {
            fprintf(stderr, "moex: the message holds a NUL byte; it is ignored\n");
            continue;
        }
        if (!line[0]) continue;
        lineedit_history_add(le, line);
        int cmd = command(&s, &conv, system, line);
        if (cmd < 0) goto done;
        if (cmd == 2) break;
        if (cmd == 1) continue;
        if (conversation_add(&conv, "user", line, line_len)) { cli_fail("out of memory"); goto done; }
        int n_all = 0;
        int32_t *all = fit_context(s.mm, &conv, think, n_ctx, reserve, &n_all);
        if (!all) {
            conversation_drop(&conv, conv.n - 1, 1);
            continue;
        }
        /* The context keeps what it shares with the conversation: only the
         * new turn is evaluated (after a shift, what follows the system
         * prompt). Recurrent state cannot be cut back, so it is
         * checkpointed where the generation prompt begins, which the next
         * turn's text keeps (the reply is rewritten after it). generate()
         * stops where the context is full and says so: the token sampled
         * from the last position still fits in the reply. */
        struct moex_generate_result r;
        sigaction(SIGINT, &on_int_replying, NULL);
        int grc = generate(&s, smp, all, n_all, generation_start(s.mm, &conv, think, all, n_all), (int)n_predict,
                           ignore_eos, stdout, NULL, reply_ids, &r);
        sigaction(SIGINT, &on_int, NULL);
        free(all);
        if (grc != 0) goto done;
        bool stopped = r.finish == MOEX_FINISH_CALLBACK;
        if (stopped) {
            interrupted = 0;
            ctrl_c_before = true;
        }
        size_t reply_len = 0;
        int n_text = r.finish == MOEX_FINISH_EOG ? r.n_generated - 1 : r.n_generated;
        char *reply = moex_detokenize(s.mm, reply_ids, n_text, &reply_len);
        /* The reply's newline reaches a pipe before the stats line does. */
        fputs(stopped ? " [stopped]\n" : "\n", stdout);
        fflush(stdout);
        generate_report(stderr, "new prompt", &r);
        int arc = reply ? conversation_add(&conv, "assistant", reply, reply_len) : -1;
        free(reply);
        if (arc != 0) { cli_fail("%s", moex_last_error()); goto done; }
    }
    rc = 0;
done:
    generate_stop_on(NULL);
    sigaction(SIGINT, &before, NULL);
    lineedit_free(le);
    free(system_text);
    conversation_clear(&conv);
    free(conv.msgs);
    free(reply_ids);
    moex_sampler_free(smp);
    if (session_close(&s)) rc = 1;
    return rc;
}
