/* moex chat: interactive multi-turn chat in the model's ChatML template. The
 * conversation stays in the KV cache: each turn only the tokens that differ
 * from what the cache holds are evaluated. */
#include "cli.h"
#include "generate.h"
#include "session.h"

#include "core/error.h"
#include "text/chat.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(FILE *out) {
    fprintf(out,
            "usage: moex chat [-m MODEL] [--system TEXT] [--no-think] [options]\n"
            "Reads one user message per line from standard input and streams the\n"
            "model's replies (a line of any length is one message). Empty line: ignored;\n"
            "/exit or end of input: quit; /reset: start a new conversation.\n\n"
            "  -s, --system TEXT     system prompt\n"
            "      --no-think        Qwen3: ask for replies without a thinking block\n"
            "  -n, --n-predict N     most tokens per reply (default 1024)\n");
    sampler_opts_help(out);
    session_opts_help(out);
}

/* Tokens of the whole conversation so far, as the KV cache holds them. */
struct history {
    int32_t *ids;
    int n, cap;
};

static int history_push(struct history *h, const int32_t *ids, int n) {
    if (h->n + n > h->cap) {
        int cap = (h->n + n) * 2;
        int32_t *g = realloc(h->ids, sizeof *g * (size_t)cap);
        if (!g) return -1;
        h->ids = g;
        h->cap = cap;
    }
    memcpy(h->ids + h->n, ids, sizeof *ids * (size_t)n);
    h->n += n;
    return 0;
}

int cmd_chat(int argc, char **argv) {
    struct session_opts so;
    struct sampler_opts sm;
    session_opts_defaults(&so);
    sampler_opts_defaults(&sm);
    const char *system = NULL;
    bool think = true;
    int64_t n_predict = 1024;
    for (int i = 1; i < argc; i++) {
        int r = session_opts_parse(&so, argc, argv, &i);
        if (!r) r = sampler_opts_parse(&sm, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v;
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) { if (!(system = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--no-think")) think = false;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_parse_int("--n-predict", v, 1, 1 << 24, &n_predict)) return 2;
        } else return cli_usage("chat", "unknown option '%s'", a);
    }
    if (session_opts_finish(&so)) return 2;
    struct session s;
    int opened = session_open(&s, &so);
    if (opened) return opened;
    struct tokenizer *tok = s.model->tok;
    int rc = 1;
    if (!tok) {
        cli_fail("chat: -m %s: the model has no tokenizer", so.model_path ? so.model_path : default_model_path());
        session_close(&s);
        return 2;
    }
    enum chat_format fmt = chat_format_detect(tokenizer_chat_template(tok));
    if (fmt == CHAT_FORMAT_UNKNOWN) {
        fprintf(stderr, "moex: the model's chat template is not one moex renders; using ChatML\n");
        fmt = CHAT_FORMAT_CHATML;
    }
    struct sampler *smp = sampler_new(&sm.params, s.model->hp.n_vocab);
    int32_t *reply_ids = malloc(sizeof *reply_ids * (size_t)n_predict);
    struct chat_text conv = { 0 };
    struct history hist = { 0 };
    char *line = NULL; /* one message, however long: a line is one user turn */
    size_t line_cap = 0;
    bool tty = isatty(0);
    bool first = true;
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
            chat_text_free(&conv);
            memset(&conv, 0, sizeof conv);
            hist.n = 0;
            context_truncate(s.ctx, 0);
            first = true;
            continue;
        }
        if (chat_append_user(&conv, fmt, first ? system : NULL, line, think) != 0) { cli_fail("%s", moex_error()); goto done; }
        first = false;
        int n_all = 0;
        int32_t *all = tokenizer_encode_alloc(tok, conv.data, conv.len, true, &n_all);
        if (!all) { cli_fail("%s", moex_error()); goto done; }
        /* Keep the cached prefix; evaluate only what is new. */
        int keep = 0;
        while (keep < hist.n && keep < n_all && hist.ids[keep] == all[keep]) keep++;
        if (keep == n_all) keep--; /* something must be evaluated to get logits */
        context_truncate(s.ctx, keep);
        context_checkpoint(s.ctx); /* the turn's start: recurrent state comes back here cheaply */
        hist.n = keep;
        if (n_all > context_n_ctx(s.ctx)) {
            fprintf(stderr, "moex: the conversation exceeds the context (%d tokens); use /reset\n", context_n_ctx(s.ctx));
            free(all);
            continue;
        }
        /* generate() stops where the context is full and says so: the token
         * sampled from the last position still fits in the reply. */
        struct generate_result r;
        /* Recurrent state cannot be cut back: checkpoint it where the
         * generation prompt begins, which the next turn's text keeps (the
         * reply is rewritten after it), so that the next turn need not
         * evaluate the conversation again from the start. */
        int start = keep;
        if (model_is_recurrent(s.model)) {
            int n_head = 0;
            size_t head_len = conv.len - chat_generation_prompt_len(fmt, think);
            int32_t *head = tokenizer_encode_alloc(tok, conv.data, head_len, true, &n_head);
            bool prefix = head && n_head > keep && n_head < n_all && !memcmp(head, all, sizeof *all * (size_t)n_head);
            free(head);
            if (prefix) {
                for (int i = keep; i < n_head; i++) sampler_accept(smp, all[i]);
                if (context_eval(s.ctx, all + keep, n_head - keep, NULL, false) != 0) {
                    cli_fail("%s", moex_error());
                    free(all);
                    goto done;
                }
                context_checkpoint(s.ctx);
                start = n_head;
            }
        }
        int grc = generate(&s, smp, all + start, n_all - start, (int)n_predict, false, stdout, NULL, reply_ids, &r);
        r.n_prompt += start - keep;
        if (history_push(&hist, all + keep, n_all - keep) != 0) { free(all); goto done; }
        free(all);
        if (grc != 0) goto done;
        /* The cache now holds the reply except its last token. */
        int n_cached_reply = r.n_generated > 0 ? r.n_generated - 1 : 0;
        if (history_push(&hist, reply_ids, n_cached_reply) != 0) goto done;
        size_t reply_len = 0;
        int n_text = r.stopped_at_eog ? r.n_generated - 1 : r.n_generated;
        char *reply = tokenizer_decode_alloc(tok, reply_ids, n_text, &reply_len);
        /* The reply's newline reaches a pipe before the stats line does. */
        fputc('\n', stdout);
        fflush(stdout);
        generate_report(stderr, "new prompt", &r);
        int arc = reply ? chat_append_reply(&conv, fmt, reply) : -1;
        free(reply);
        if (arc != 0) { cli_fail("%s", moex_error()); goto done; }
    }
    rc = 0;
done:
    free(line);
    chat_text_free(&conv);
    free(hist.ids);
    free(reply_ids);
    sampler_free(smp);
    if (session_close(&s)) rc = 1;
    return rc;
}
