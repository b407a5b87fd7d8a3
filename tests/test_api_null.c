/* The NULL rule of include/moex.h over every public function: NULL in each
 * pointer argument (one at a time, the others valid) is refused with -1 /
 * NULL / false / 0 and "FUNCTION: NAME is NULL" in moex_last_error(), the
 * free functions take NULL, and the arguments documented as optional are
 * taken. The list of functions is read from the header itself: one that
 * this test does not call fails it. */
#include "moex_tools.h"

#include "harness.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FUNCTIONS 256

static const char *called[MAX_FUNCTIONS];
static int n_called;

/* Marks a function as covered. */
static void covers(const char *name) {
    if (n_called < MAX_FUNCTIONS) called[n_called++] = name;
}

/* The error says that `name` was NULL in `function`. */
static bool refused(const char *function, const char *name) {
    char want[256];
    snprintf(want, sizeof want, "%s: %s is NULL", function, name);
    bool ok = strstr(moex_last_error(), want) != NULL;
    if (!ok) fprintf(stderr, "expected \"%s\", got \"%s\"\n", want, moex_last_error());
    return ok;
}

#define REFUSED(expr, fn, name) CHECKF((expr) && refused(fn, name), "%s with %s NULL", fn, name)

static char model_path[4096];

static moex_model *load_model(void) {
    struct moex_model_params mp;
    moex_model_params_default(&mp);
    mp.path = model_path;
    mp.n_threads = 1;
    mp.pin_threads = false;
    return moex_model_load(&mp);
}

static void no_pointer_arguments(void) {
    covers("moex_version");
    CHECK(moex_version() != NULL);
    covers("moex_last_error");
    CHECK(moex_last_error() != NULL);
    covers("moex_isa");
    CHECK(moex_isa() != NULL);
    covers("moex_cpu_features");
    CHECK(moex_cpu_features() != NULL);
    covers("moex_sim_figures_help");
    CHECK(moex_sim_figures_help() != NULL);
    covers("moex_file_unlink_pending");
    moex_file_unlink_pending();
}

/* The functions that make or free objects, and those whose NULL is optional. */
static void frees_and_optionals(moex_model *m) {
    covers("moex_model_free");
    moex_model_free(NULL);
    covers("moex_context_free");
    moex_context_free(NULL);
    covers("moex_sampler_free");
    moex_sampler_free(NULL);
    covers("moex_decoder_free");
    moex_decoder_free(NULL);
    covers("moex_file_discard");
    moex_file_discard(NULL);
    covers("moex_routing_free");
    moex_routing_free(NULL);

    covers("moex_set_isa"); /* NULL: the best this CPU has, before any model is loaded */
    CHECK(moex_set_isa(NULL) == -1 && strstr(moex_last_error(), "loaded"));
    covers("moex_check_sim_figures"); /* NULL: the defaults */
    CHECK(moex_check_sim_figures(NULL) == 0);

    covers("moex_model_params_default");
    moex_model_params_default(NULL);
    CHECK(refused("moex_model_params_default", "p"));
    covers("moex_model_load");
    REFUSED(moex_model_load(NULL) == NULL, "moex_model_load", "p");
    covers("moex_context_params_default");
    moex_context_params_default(NULL);
    CHECK(refused("moex_context_params_default", "p"));
    covers("moex_sampler_params_default");
    moex_sampler_params_default(NULL);
    CHECK(refused("moex_sampler_params_default", "p"));
    covers("moex_synth_params_default");
    moex_synth_params_default(NULL);
    CHECK(refused("moex_synth_params_default", "p"));

    covers("moex_context_new");
    REFUSED(moex_context_new(NULL, NULL) == NULL, "moex_context_new", "m");
    moex_context *c = moex_context_new(m, NULL); /* NULL params: the defaults */
    CHECK(c != NULL);
    moex_context_free(c);
    covers("moex_context_new_seqs");
    REFUSED(moex_context_new_seqs(NULL, NULL, 2) == NULL, "moex_context_new_seqs", "m");
    c = moex_context_new_seqs(m, NULL, 2);
    CHECK(c != NULL);
    moex_context_free(c);
    covers("moex_sampler_new");
    REFUSED(moex_sampler_new(NULL, NULL) == NULL, "moex_sampler_new", "m");
    moex_sampler *s = moex_sampler_new(m, NULL);
    CHECK(s != NULL);
    moex_sampler_free(s);
    covers("moex_decoder_new");
    REFUSED(moex_decoder_new(NULL) == NULL, "moex_decoder_new", "m");
}

static void model_queries(moex_model *m) {
    covers("moex_model_name");
    REFUSED(moex_model_name(NULL) == NULL, "moex_model_name", "m");
    covers("moex_model_arch");
    REFUSED(moex_model_arch(NULL) == NULL, "moex_model_arch", "m");
    covers("moex_model_n_vocab");
    REFUSED(moex_model_n_vocab(NULL) == -1, "moex_model_n_vocab", "m");
    covers("moex_model_n_ctx_train");
    REFUSED(moex_model_n_ctx_train(NULL) == -1, "moex_model_n_ctx_train", "m");
    covers("moex_model_n_params");
    REFUSED(moex_model_n_params(NULL) == 0, "moex_model_n_params", "m");
    covers("moex_model_get_info");
    struct moex_model_info info;
    memset(&info, 0xff, sizeof info);
    moex_model_get_info(NULL, &info);
    CHECK(refused("moex_model_get_info", "m") && info.n_layers == 0);
    moex_model_get_info(m, NULL);
    CHECK(refused("moex_model_get_info", "out"));
    covers("moex_pack_path_for");
    char out[256];
    REFUSED(moex_pack_path_for(NULL, out, sizeof out) == -1, "moex_pack_path_for", "model_path");
    REFUSED(moex_pack_path_for("a.gguf", NULL, 16) == -1, "moex_pack_path_for", "out");
    covers("moex_model_pack_path");
    REFUSED(moex_model_pack_path(NULL) == NULL, "moex_model_pack_path", "m");
    covers("moex_file_info");
    REFUSED(moex_file_info(NULL, false) == NULL, "moex_file_info", "path");
    covers("moex_measure_bandwidth");
    struct moex_bandwidth bw;
    REFUSED(moex_measure_bandwidth(NULL, 1, &bw) == -1, "moex_measure_bandwidth", "m");
    REFUSED(moex_measure_bandwidth(m, 1, NULL) == -1, "moex_measure_bandwidth", "out");
}

static void text(moex_model *m) {
    int32_t ids[16];
    int n = 0;
    size_t len = 0;
    covers("moex_model_has_tokenizer");
    REFUSED(!moex_model_has_tokenizer(NULL), "moex_model_has_tokenizer", "m");
    covers("moex_tokenize");
    REFUSED(moex_tokenize(NULL, "hi", 2, false, false, ids, 16) == -1, "moex_tokenize", "m");
    REFUSED(moex_tokenize(m, NULL, 2, false, false, ids, 16) == -1, "moex_tokenize", "text");
    REFUSED(moex_tokenize(m, "hi", 2, false, false, NULL, 16) == -1, "moex_tokenize", "out");
    CHECK(moex_tokenize(m, NULL, 0, false, false, ids, 16) == 0); /* no text at all */
    covers("moex_tokenize_alloc");
    REFUSED(moex_tokenize_alloc(NULL, "hi", 2, false, false, &n) == NULL, "moex_tokenize_alloc", "m");
    REFUSED(moex_tokenize_alloc(m, NULL, 2, false, false, &n) == NULL, "moex_tokenize_alloc", "text");
    REFUSED(moex_tokenize_alloc(m, "hi", 2, false, false, NULL) == NULL, "moex_tokenize_alloc", "n_out");
    int32_t one = 65;
    covers("moex_detokenize");
    REFUSED(moex_detokenize(NULL, &one, 1, &len) == NULL, "moex_detokenize", "m");
    REFUSED(moex_detokenize(m, NULL, 1, &len) == NULL, "moex_detokenize", "ids");
    char *t = moex_detokenize(m, &one, 1, NULL); /* len may be NULL */
    CHECK(t != NULL);
    free(t);
    covers("moex_token_piece");
    REFUSED(moex_token_piece(NULL, one, &len) == NULL, "moex_token_piece", "m");
    REFUSED(moex_token_piece(m, one, NULL) == NULL, "moex_token_piece", "len");
    covers("moex_token_is_normal");
    REFUSED(!moex_token_is_normal(NULL, one), "moex_token_is_normal", "m");
    covers("moex_token_is_eog");
    REFUSED(!moex_token_is_eog(NULL, one), "moex_token_is_eog", "m");
    covers("moex_token_bos");
    REFUSED(moex_token_bos(NULL) == -1, "moex_token_bos", "m");
    covers("moex_token_eos");
    REFUSED(moex_token_eos(NULL) == -1, "moex_token_eos", "m");

    moex_decoder *d = moex_decoder_new(m);
    CHECK(d != NULL);
    covers("moex_decoder_put");
    REFUSED(moex_decoder_put(NULL, one, &len) == NULL, "moex_decoder_put", "d");
    REFUSED(moex_decoder_put(d, one, NULL) == NULL, "moex_decoder_put", "len");
    covers("moex_decoder_flush");
    REFUSED(moex_decoder_flush(NULL, &len) == NULL, "moex_decoder_flush", "d");
    REFUSED(moex_decoder_flush(d, NULL) == NULL, "moex_decoder_flush", "len");
    moex_decoder_free(d);

    struct moex_chat_message msg = { "user", "hi" }, no_content = { "user", NULL };
    covers("moex_chat_apply");
    REFUSED(moex_chat_apply(NULL, &msg, 1, true, false, &len) == NULL, "moex_chat_apply", "m");
    REFUSED(moex_chat_apply(m, NULL, 1, true, false, &len) == NULL, "moex_chat_apply", "msgs");
    CHECK(moex_chat_apply(m, &no_content, 1, true, false, &len) == NULL && strstr(moex_last_error(), "content"));
    t = moex_chat_apply(m, &msg, 1, true, false, NULL); /* len may be NULL */
    CHECK(t != NULL);
    free(t);
    covers("moex_chat_template_known");
    REFUSED(!moex_chat_template_known(NULL), "moex_chat_template_known", "m");
}

static void contexts(moex_model *m) {
    moex_context *c = moex_context_new(m, NULL);
    moex_sampler *s = moex_sampler_new(m, NULL);
    CHECK(c && s);
    if (!c || !s) return;
    int32_t one = 65, seq = 0;
    CHECK(moex_eval(c, &one, 1) == 0);
    int V = moex_model_n_vocab(m);
    float *logits = malloc(sizeof *logits * (size_t)V);

    covers("moex_n_ctx");
    REFUSED(moex_n_ctx(NULL) == -1, "moex_n_ctx", "c");
    covers("moex_n_past");
    REFUSED(moex_n_past(NULL) == -1, "moex_n_past", "c");
    covers("moex_eval");
    REFUSED(moex_eval(NULL, &one, 1) == -1, "moex_eval", "c");
    REFUSED(moex_eval(c, NULL, 1) == -1, "moex_eval", "tokens");
    covers("moex_eval_all_logits");
    REFUSED(moex_eval_all_logits(NULL, &one, 1, logits) == -1, "moex_eval_all_logits", "c");
    REFUSED(moex_eval_all_logits(c, NULL, 1, logits) == -1, "moex_eval", "tokens");
    REFUSED(moex_eval_all_logits(c, &one, 1, NULL) == -1, "moex_eval_all_logits", "logits");
    covers("moex_prefill");
    REFUSED(moex_prefill(NULL, &one, 1) == -1, "moex_prefill", "c");
    REFUSED(moex_prefill(c, NULL, 1) == -1, "moex_prefill", "tokens");
    covers("moex_shared_prefix");
    REFUSED(moex_shared_prefix(NULL, &one, 1) == -1, "moex_shared_prefix", "c");
    REFUSED(moex_shared_prefix(c, NULL, 1) == -1, "moex_shared_prefix", "tokens");
    covers("moex_truncate");
    moex_truncate(NULL, 0);
    CHECK(refused("moex_truncate", "c"));
    covers("moex_logits");
    REFUSED(moex_logits(NULL) == NULL, "moex_logits", "c");
    /* The errors above kept what the context held: one token. */
    CHECK(moex_n_past(c) == 1);

    covers("moex_sampler_set_penalties");
    REFUSED(moex_sampler_set_penalties(NULL, 0, 0) == -1, "moex_sampler_set_penalties", "s");
    covers("moex_sampler_set_logit_bias");
    float bias1 = 1;
    REFUSED(moex_sampler_set_logit_bias(NULL, &one, &bias1, 1) == -1, "moex_sampler_set_logit_bias", "s");
    covers("moex_model_n_embd");
    REFUSED(moex_model_n_embd(NULL) == -1, "moex_model_n_embd", "m");
    covers("moex_embed");
    REFUSED(moex_embed(NULL, &one, 1, &bias1) == -1, "moex_embed", "c");
    covers("moex_sampler_accept");
    moex_sampler_accept(NULL, one);
    CHECK(refused("moex_sampler_accept", "s"));
    covers("moex_sample");
    REFUSED(moex_sample(NULL, c) == -1, "moex_sample", "s");
    REFUSED(moex_sample(s, NULL) == -1, "moex_sample", "c");
    covers("moex_generate");
    struct moex_generate_params gp = { .max_tokens = 2 };
    struct moex_generate_result gr;
    REFUSED(moex_generate(NULL, s, &one, 1, &gp, &gr) == -1, "moex_generate", "c");
    REFUSED(moex_generate(c, NULL, &one, 1, &gp, &gr) == -1, "moex_generate", "s");
    REFUSED(moex_generate(c, s, NULL, 1, &gp, &gr) == -1, "moex_generate", "prompt");
    REFUSED(moex_generate(c, s, &one, 1, NULL, &gr) == -1, "moex_generate", "p");
    REFUSED(moex_generate(c, s, &one, 1, &gp, NULL) == -1, "moex_generate", "r");

    covers("moex_n_seq");
    REFUSED(moex_n_seq(NULL) == -1, "moex_n_seq", "c");
    covers("moex_eval_batch");
    REFUSED(moex_eval_batch(NULL, &one, &seq, 1) == -1, "moex_eval_batch", "c");
    REFUSED(moex_eval_batch(c, NULL, &seq, 1) == -1, "moex_eval_batch", "tokens");
    REFUSED(moex_eval_batch(c, &one, NULL, 1) == -1, "moex_eval_batch", "seq_ids");
    covers("moex_seq_logits");
    REFUSED(moex_seq_logits(NULL, 0) == NULL, "moex_seq_logits", "c");
    covers("moex_seq_n_past");
    REFUSED(moex_seq_n_past(NULL, 0) == -1, "moex_seq_n_past", "c");
    covers("moex_seq_shared_prefix");
    REFUSED(moex_seq_shared_prefix(NULL, 0, &one, 1) == -1, "moex_seq_shared_prefix", "c");
    REFUSED(moex_seq_shared_prefix(c, 0, NULL, 1) == -1, "moex_seq_shared_prefix", "tokens");
    covers("moex_seq_truncate");
    moex_seq_truncate(NULL, 0, 0);
    CHECK(refused("moex_seq_truncate", "c"));
    covers("moex_seq_checkpoint");
    moex_seq_checkpoint(NULL, 0);
    CHECK(refused("moex_seq_checkpoint", "c"));
    covers("moex_seq_copy");
    REFUSED(moex_seq_copy(NULL, 0, 0) == -1, "moex_seq_copy", "c");
    covers("moex_sample_seq");
    REFUSED(moex_sample_seq(NULL, c, 0) == -1, "moex_sample_seq", "s");
    REFUSED(moex_sample_seq(s, NULL, 0) == -1, "moex_sample_seq", "c");

    covers("moex_context_counters");
    struct moex_counters k;
    moex_context_counters(NULL, &k);
    CHECK(refused("moex_context_counters", "c") && k.tokens == 0);
    moex_context_counters(c, NULL);
    CHECK(refused("moex_context_counters", "out"));
    covers("moex_context_phase_counters");
    struct moex_phase_counters pc;
    moex_context_phase_counters(NULL, MOEX_PHASE_DECODE, &pc);
    CHECK(refused("moex_context_phase_counters", "c"));
    moex_context_phase_counters(c, MOEX_PHASE_DECODE, NULL);
    CHECK(refused("moex_context_phase_counters", "out"));
    covers("moex_context_device_modelled");
    REFUSED(!moex_context_device_modelled(NULL), "moex_context_device_modelled", "c");
    covers("moex_context_simulated_ns");
    REFUSED(moex_context_simulated_ns(NULL, MOEX_PHASE_DECODE) == -1, "moex_context_simulated_ns", "c");
    covers("moex_context_op_times");
    struct moex_op_times ot;
    moex_context_op_times(NULL, &ot);
    CHECK(refused("moex_context_op_times", "c"));
    moex_context_op_times(c, NULL);
    CHECK(refused("moex_context_op_times", "out"));
    covers("moex_context_reset_op_times");
    moex_context_reset_op_times(NULL);
    CHECK(refused("moex_context_reset_op_times", "c"));
    covers("moex_context_has_board");
    REFUSED(!moex_context_has_board(NULL), "moex_context_has_board", "c");
    covers("moex_context_board_dense_ns");
    REFUSED(moex_context_board_dense_ns(NULL, 1, 0) == -1, "moex_context_board_dense_ns", "c");
    covers("moex_context_board_expert_uses");
    uint64_t hits, misses;
    moex_context_board_expert_uses(NULL, &hits, &misses);
    CHECK(refused("moex_context_board_expert_uses", "c"));
    moex_context_board_expert_uses(c, NULL, &misses);
    CHECK(refused("moex_context_board_expert_uses", "hits"));
    moex_context_board_expert_uses(c, &hits, NULL);
    CHECK(refused("moex_context_board_expert_uses", "misses"));
    covers("moex_context_memory");
    struct moex_memory mem;
    moex_context_memory(NULL, &mem);
    CHECK(refused("moex_context_memory", "c"));
    moex_context_memory(c, NULL);
    CHECK(refused("moex_context_memory", "out"));
    covers("moex_context_profile_text");
    REFUSED(moex_context_profile_text(NULL) == NULL, "moex_context_profile_text", "c");
    covers("moex_context_note");
    REFUSED(moex_context_note(NULL) == NULL, "moex_context_note", "c");

    char path[4200];
    snprintf(path, sizeof path, "%s/null.out", test_tmpdir());
    covers("moex_context_write_trace");
    REFUSED(moex_context_write_trace(NULL, path) == -1, "moex_context_write_trace", "c");
    REFUSED(moex_context_write_trace(c, NULL) == -1, "moex_context_write_trace", "path");
    covers("moex_context_write_trace_file");
    REFUSED(moex_context_write_trace_file(NULL, moex_file_create(path)) == -1, "moex_context_write_trace_file", "c");
    REFUSED(moex_context_write_trace_file(c, NULL) == -1, "moex_context_write_trace_file", "f");

    covers("moex_file_create");
    REFUSED(moex_file_create(NULL) == NULL, "moex_file_create", "path");
    covers("moex_file_write");
    moex_file *f = moex_file_create(path);
    CHECK(f != NULL);
    REFUSED(moex_file_write(NULL, "x", 1) == -1, "moex_file_write", "f");
    REFUSED(moex_file_write(f, NULL, 1) == -1, "moex_file_write", "data");
    moex_file_discard(f);
    covers("moex_file_commit");
    REFUSED(moex_file_commit(NULL) == -1, "moex_file_commit", "f");

    covers("moex_routing_new");
    REFUSED(moex_routing_new(NULL) == NULL, "moex_routing_new", "c");
    moex_routing *r = moex_routing_new(c);
    CHECK(r != NULL);
    covers("moex_routing_begin_sequence");
    moex_routing_begin_sequence(NULL);
    CHECK(refused("moex_routing_begin_sequence", "r"));
    covers("moex_routing_set_half");
    moex_routing_set_half(NULL, 1);
    CHECK(refused("moex_routing_set_half", "r"));
    covers("moex_routing_write");
    REFUSED(moex_routing_write(NULL, moex_file_create(path)) == -1, "moex_routing_write", "r");
    REFUSED(moex_routing_write(r, NULL) == -1, "moex_routing_write", "f");
    covers("moex_routing_report");
    REFUSED(moex_routing_report(NULL) == NULL, "moex_routing_report", "r");
    moex_routing_free(r);

    covers("moex_pack");
    struct moex_pack_result pr;
    REFUSED(moex_pack(NULL, false, moex_file_create(path), &pr) == -1, "moex_pack", "m");
    REFUSED(moex_pack(m, false, NULL, &pr) == -1, "moex_pack", "f");
    REFUSED(moex_pack(m, false, moex_file_create(path), NULL) == -1, "moex_pack", "r");

    free(logits);
    moex_sampler_free(s);
    moex_context_free(c);
}

static void tools(void) {
    covers("moex_probe");
    REFUSED(moex_probe(NULL) == -1, "moex_probe", "p");
    covers("moex_synth_check");
    struct moex_synth_params sp;
    moex_synth_params_default(&sp);
    REFUSED(moex_synth_check(NULL, NULL) != MOEX_SYNTH_OK, "moex_synth_check", "p");
    CHECK(moex_synth_check(&sp, NULL) == MOEX_SYNTH_OK); /* shape may be NULL */
    covers("moex_rknpu_program");
    REFUSED(moex_rknpu_program(4, 64, 64, NULL, NULL) == -1, "moex_rknpu_program", "write");
    covers("moex_check_rknpu_options");
    CHECK(moex_check_rknpu_options(NULL) == 0); /* NULL: the defaults, as moex_check_sim_figures */
    covers("moex_sampler_set_grammar");
    REFUSED(moex_sampler_set_grammar(NULL, "root ::= \"a\"", NULL) == -1, "moex_sampler_set_grammar", "s");
    covers("moex_json_schema_to_grammar"); /* NULL schema: any JSON object */
    char *any = moex_json_schema_to_grammar(NULL);
    CHECK(any != NULL);
    free(any);
    covers("moex_chat_apply_tools");
    CHECK(moex_chat_apply_tools(NULL, NULL, NULL, 0, NULL, true, false, NULL) == NULL &&
          refused("moex_chat_apply_tools", "m"));
    covers("moex_chat_tool_grammar");
    CHECK(moex_chat_tool_grammar(NULL, "[]", NULL, false) == NULL && refused("moex_chat_tool_grammar", "m"));
    covers("moex_chat_tool_markers");
    const char *open_marker, *close_marker;
    CHECK(!moex_chat_tool_markers(NULL, &open_marker, &close_marker) && refused("moex_chat_tool_markers", "m"));
    covers("moex_synth_presets");
    CHECK(strstr(moex_synth_presets(), "tiny") != NULL);
    covers("moex_device_names");
    CHECK(strstr(moex_device_names(), "cpu") != NULL);
    covers("moex_device_describe");
    struct moex_device_desc dd;
    REFUSED(moex_device_describe(NULL, &dd) == -1, "moex_device_describe", "name");
    REFUSED(moex_device_describe("cpu", NULL) == -1, "moex_device_describe", "out");
    covers("moex_synth_write");
    REFUSED(moex_synth_write(NULL, model_path) == -1, "moex_synth_write", "p");
    REFUSED(moex_synth_write(&sp, NULL) == -1, "moex_synth_write", "path");
}

/* Every MOEX_API function of a public header was called above; the
 * functions found there. */
static int check_header(const char *file) {
    char header[4096];
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(header, sizeof header, "%.*s%s../include/%s", dir, src, slash ? "/" : "", file);
    size_t size = 0;
    char *text = read_whole_file(header, &size);
    CHECKF(text != NULL, "cannot read %s", header);
    if (!text) return 0;
    int found = 0;
    for (char *p = text; (p = strstr(p, "MOEX_API ")) != NULL; p += 9) {
        char *paren = strchr(p, '(');
        if (!paren || memchr(p, ';', (size_t)(paren - p)) || memchr(p, '\n', (size_t)(paren - p))) continue;
        char *end = paren, *start = paren;
        while (start > p && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                             (start[-1] >= '0' && start[-1] <= '9')))
            start--;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(end - start), start);
        if (strncmp(name, "moex_", 5)) continue;
        found++;
        bool seen = false;
        for (int i = 0; i < n_called && !seen; i++) seen = !strcmp(called[i], name);
        CHECKF(seen, "%s (include/%s) is not called with NULL arguments by this test", name, file);
    }
    free(text);
    return found;
}

static void check_complete(void) {
    int found = check_header("moex.h") + check_header("moex_tools.h");
    CHECKF(found >= 90, "only %d MOEX_API functions found in include/moex.h and moex_tools.h", found);
}

int main(void) {
    if (test_synth_file("tiny", NULL, "null.gguf", model_path, sizeof model_path) != 0) return 1;
    no_pointer_arguments();
    moex_model *m = load_model();
    CHECK(m != NULL);
    if (m) {
        frees_and_optionals(m);
        model_queries(m);
        text(m);
        contexts(m);
        moex_model_free(m);
    }
    tools();
    check_complete();
    return test_finish();
}
