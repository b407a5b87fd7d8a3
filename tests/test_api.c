/* The public API (include/moex.h) on a tiny synthetic model: loading and its
 * errors, tokens and text, chat templates, generation (the loop, its stops,
 * prefix reuse, the step-wise calls giving the same tokens) and counters. */
#include "moex_tools.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>

static char model_path[4096];

struct collected {
    int32_t ids[256];
    int n, stop_after;
    char text[4096];
    size_t len;
};

static int collect(void *user, int32_t id, const char *text, size_t len) {
    struct collected *c = user;
    if (id >= 0 && c->n < 256) c->ids[c->n++] = id;
    if (c->len + len < sizeof c->text) { memcpy(c->text + c->len, text, len); c->len += len; }
    return c->stop_after && c->n >= c->stop_after;
}

static moex_model *load(const char *device) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 2;
    mp.pin_threads = false;
    mp.device.device = device;
    return moex_model_load(&mp);
}

static void test_errors(void) {
    CHECK(!strcmp(moex_version(), MOEX_VERSION));
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = "/nonexistent/model.gguf";
    CHECK(moex_model_load(&mp) == NULL && moex_last_error()[0]);
    CHECK(load("gpu") == NULL && strstr(moex_last_error(), "gpu"));
}

static void test_text(moex_model *m) {
    CHECK(moex_model_has_tokenizer(m));
    const char *s = "Hello world, hello moex";
    int n = 0;
    int32_t *ids = moex_tokenize_alloc(m, s, strlen(s), false, true, &n);
    CHECK(ids && n > 0);
    size_t len = 0;
    char *back = ids ? moex_detokenize(m, ids, n, &len) : NULL;
    CHECK(back && len == strlen(s) && !memcmp(back, s, len));
    int32_t small[2];
    CHECK(moex_tokenize(m, s, strlen(s), false, true, small, 2) == -1 || n <= 2);
    int32_t buf[64];
    int n_bos = moex_tokenize(m, s, strlen(s), true, true, buf, 64);
    CHECK(n_bos == n || (n_bos == n + 1 && buf[0] == moex_token_bos(m)));
    /* the streaming decoder gives the same bytes */
    moex_decoder *d = moex_decoder_new(m);
    char joined[256] = "";
    size_t jl = 0, pl;
    for (int i = 0; d && i < n; i++) {
        const char *p = moex_decoder_put(d, ids[i], &pl);
        CHECK(p != NULL);
        if (p && jl + pl < sizeof joined) { memcpy(joined + jl, p, pl); jl += pl; }
    }
    if (d) moex_decoder_flush(d, &pl);
    CHECK(jl == strlen(s) && !memcmp(joined, s, jl));
    moex_decoder_free(d);
    free(back);
    free(ids);

    struct moex_chat_message msgs[] = { { "system", "be brief" }, { "user", "hi" } };
    char *chat = moex_chat_apply(m, msgs, 2, true, true, &len);
    CHECK(chat && strstr(chat, "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                                 "<|im_start|>assistant\n"));
    free(chat);
}

static void test_generate(moex_model *m) {
    struct moex_context_params cp;
    moex_context_params_default(&cp);
    cp.n_ctx = 64;
    moex_context *c = moex_context_new(m, &cp);
    CHECK(c && moex_n_ctx(c) == 64 && moex_n_past(c) == 0 && moex_logits(c) == NULL);
    if (!c) return;
    struct moex_sampler_params sp;
    moex_sampler_params_default(&sp);
    sp.temperature = 0; /* greedy: the same tokens every time */
    int32_t prompt[32];
    int n_prompt = moex_tokenize(m, "Once upon a time", 16, true, true, prompt, 32);
    CHECK(n_prompt > 0);

    struct collected a = { 0 }, b = { 0 };
    struct moex_generate_params gp = { .max_tokens = 12, .ignore_eog = true, .on_token = collect, .user = &a };
    struct moex_generate_result r;
    moex_sampler *s = moex_sampler_new(m, &sp);
    CHECK(moex_generate(c, s, prompt, n_prompt, &gp, &r) == 0);
    CHECK(r.n_prompt == n_prompt && r.n_evaluated == n_prompt && r.n_generated == 12 && a.n == 12);
    CHECK(r.finish == MOEX_FINISH_LENGTH);
    CHECK(moex_n_past(c) == n_prompt + 11); /* the last token is sampled, not evaluated */
    moex_sampler_free(s);

    /* The same prompt again: the context keeps all but the last prompt token. */
    s = moex_sampler_new(m, &sp);
    gp.user = &b;
    CHECK(moex_generate(c, s, prompt, n_prompt, &gp, &r) == 0);
    CHECK(r.n_evaluated == 1 && b.n == 12 && !memcmp(a.ids, b.ids, sizeof a.ids[0] * 12));
    moex_sampler_free(s);

    /* A checkpoint inside the prompt splits its prefill: the same tokens. */
    moex_truncate(c, 0);
    s = moex_sampler_new(m, &sp);
    struct collected split = { 0 };
    gp.user = &split;
    gp.checkpoint_at = n_prompt / 2;
    CHECK(moex_generate(c, s, prompt, n_prompt, &gp, &r) == 0);
    CHECK(r.n_evaluated == n_prompt && split.n == 12 && !memcmp(a.ids, split.ids, sizeof a.ids[0] * 12));
    gp.checkpoint_at = 0;
    moex_sampler_free(s);

    /* Step by step: prefill, sample, eval gives the same tokens. */
    s = moex_sampler_new(m, &sp);
    CHECK(moex_prefill(c, prompt, n_prompt) == 0 && moex_n_past(c) == n_prompt);
    for (int i = 0; i < 12; i++) {
        int32_t id = moex_sample(s, c);
        CHECKF(id == a.ids[i], "token %d: %d, not %d", i, (int)id, (int)a.ids[i]);
        CHECK(moex_eval(c, &id, 1) == 0);
    }
    moex_sampler_free(s);

    /* Stops: the callback, and the context filling up. */
    s = moex_sampler_new(m, &sp);
    struct collected three = { .stop_after = 3 };
    gp.user = &three;
    CHECK(moex_generate(c, s, prompt, n_prompt, &gp, &r) == 0 && r.finish == MOEX_FINISH_CALLBACK &&
          r.n_generated == 3);
    struct collected full = { 0 };
    gp.user = &full;
    gp.max_tokens = 1000;
    CHECK(moex_generate(c, s, prompt, n_prompt, &gp, &r) == 0 && r.finish == MOEX_FINISH_CONTEXT);
    CHECK(moex_n_past(c) == 64 && r.n_generated == 64 - n_prompt + 1);
    moex_sampler_free(s);

    /* A prompt longer than the context is an error, not a crash. */
    int32_t *longp = calloc(100, sizeof *longp);
    CHECK(longp && moex_prefill(c, longp, 100) == -1 && strstr(moex_last_error(), "does not fit"));
    free(longp);

    struct moex_counters k;
    moex_context_counters(c, &k);
    CHECK(k.tokens > 64 && k.rows_cpu > 0 && k.rows_device == 0 && !strcmp(k.device, "none"));
    /* Tokens past the context's end are refused with the numbers, before
     * any work: the context keeps what it holds. */
    int32_t two[2] = { prompt[0], prompt[0] };
    CHECK(moex_eval(c, two, 2) == -1 && strstr(moex_last_error(), "2 tokens do not fit after 64 in the context of 64"));
    CHECK(moex_n_past(c) == 64);
    CHECK(moex_context_write_trace(c, "/dev/null") == -1 && strstr(moex_last_error(), "records no timeline"));
    char path[4096];
    snprintf(path, sizeof path, "%s/none.json", test_tmpdir());
    moex_file *f = moex_file_create(path);
    CHECK(f && moex_context_write_trace_file(c, f) == -1 && strstr(moex_last_error(), "records no timeline"));
    moex_context_free(c);

    /* A context that records one writes it. */
    cp.trace = true;
    c = moex_context_new(m, &cp);
    CHECK(c && moex_prefill(c, prompt, n_prompt) == 0);
    snprintf(path, sizeof path, "%s/trace.json", test_tmpdir());
    CHECK(c && moex_context_write_trace(c, path) == 0);
    size_t size = 0;
    char *json = read_whole_file(path, &size);
    CHECK(json && size > 2 && json[0] == '{' && strstr(json, "traceEvents"));
    free(json);
    moex_context_free(c);
}

struct heard {
    int notes, warnings, progress_ends;
    char last_warning[1024], last_note[1024];
};

static void on_log(void *user, enum moex_log_level level, const char *message) {
    struct heard *h = user;
    if (level == MOEX_LOG_WARN) h->warnings++;
    else h->notes++;
    snprintf(level == MOEX_LOG_WARN ? h->last_warning : h->last_note, sizeof h->last_note, "%s", message);
}

static void on_progress(void *user, const char *label, uint64_t done, uint64_t total) {
    struct heard *h = user;
    (void)label;
    if (done == total) h->progress_ends++;
}

/* Notes and progress reach the callbacks, once per model however many contexts. */
static void test_callbacks(void) {
    struct heard h = { 0 };
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 2;
    mp.pin_threads = false;
    mp.device.device = "cpu";
    mp.device.min_m = 1;
    mp.device.pack_path = "/nonexistent/api.mxpk";
    mp.log = on_log;
    mp.progress = on_progress;
    mp.user = &h;
    moex_model *m = moex_model_load(&mp);
    CHECK(m != NULL);
    if (!m) return;
    CHECK(!strcmp(moex_model_pack_path(m), "/nonexistent/api.mxpk"));
    moex_context *a = moex_context_new(m, NULL), *b = moex_context_new(m, NULL);
    CHECK(a && b);
    CHECKF(h.warnings == 1 && strstr(h.last_warning, "pack file refused"), "%d warnings, last '%s'", h.warnings,
           h.last_warning);
    /* then what the budget holds, once */
    CHECKF(h.notes == 1 && strstr(h.last_note, "device cpu: the budget of") && strstr(h.last_note, "16 of 16 experts"),
           "%d notes, last '%s'", h.notes, h.last_note);
    CHECK(h.progress_ends == 4); /* each context fills its device slots: pinned experts, then the backbone */
    struct moex_counters k;
    if (a) moex_context_counters(a, &k);
    CHECK(a && !strcmp(k.device, "cpu"));
    moex_context_free(a);
    moex_context_free(b);
    moex_model_free(m);
}

int main(void) {
    if (test_synth_file("tiny", NULL, "api.gguf", model_path, sizeof model_path) != 0) return 1;
    test_errors();
    moex_model *m = load("none");
    CHECK(m != NULL);
    if (m) {
        CHECK(moex_model_n_vocab(m) > 0 && moex_model_n_params(m) > 0 && !strcmp(moex_model_arch(m), "qwen3moe"));
        CHECK(moex_model_pack_path(m) == NULL);
        test_text(m);
        test_generate(m);
    }
    moex_model_free(m);
    test_callbacks();
    return test_finish();
}
