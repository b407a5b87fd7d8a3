/* moex: MoE LLM inference. The one public header of libmoex.
 *
 * A model (weights mapped from a GGUF file, the worker threads, the device
 * options) is shared by the contexts made from it; a context holds one
 * sequence's state (KV cache, recurrent state, the expert executor) and the
 * tokens it has evaluated, so that a new prompt evaluates only what differs,
 * or several sequences' that it evaluates in shared batches
 * (moex_context_new_seqs).
 *
 * The library never prints and never reads the environment: notes and
 * progress go to the callback in moex_model_params, errors are returned and
 * described by moex_last_error().
 *
 * Thread safety. Loaded models and their tokenizer are read-only: the
 * tokenizer, chat and model query functions may be called from any thread.
 * The contexts of one model share its worker threads, so evaluation
 * (moex_eval, moex_eval_batch, moex_prefill, moex_generate,
 * moex_context_new) runs on one thread at a time per model; a context (all
 * its sequences) and a sampler belong to one thread at a time: a second
 * call on a context while one that evaluates or changes it runs (from
 * another thread, or from the first call's callback) returns -1 (void
 * functions: does nothing) with "the context is in use" in the error, and
 * one that needs the model's threads while another call runs on them (an
 * evaluation of another of its contexts, moex_context_new, moex_pack,
 * moex_measure_bandwidth) returns -1 with "the model's threads are in use".
 * moex_last_error() is per thread.
 *
 * NULL arguments. A NULL object (model, context, sampler, decoder, file,
 * routing recorder, parameters) or NULL for any other pointer argument is
 * refused with "FUNCTION: NAME is NULL" in moex_last_error() and the
 * function's error value: -1 for int and double, NULL for pointers, false
 * for bool, 0 for uint64_t counts (moex_synth_check: not MOEX_SYNTH_OK);
 * void functions then do nothing (an output struct given is zeroed). The
 * exceptions: the *_free and
 * moex_file_discard functions take NULL and do nothing; NULL parameters of
 * moex_context_new(_seqs) and moex_sampler_new are the defaults; NULL isa
 * and spec of moex_set_isa and moex_check_sim_figures the defaults; the
 * len outputs of moex_detokenize and moex_chat_apply, and the shape of
 * moex_synth_check, may be NULL; a buffer with a count of 0 may be NULL
 * (text with len 0, out with max_out 0, ids and msgs with n 0, data with n
 * 0). The functions that take over a moex_file (moex_context_write_trace_file,
 * moex_routing_write, moex_pack) discard it on any refusal. */
#ifndef MOEX_H
#define MOEX_H

/* The model's threads have other users, one thread at a time per model like
 * evaluation (moex_eval_all_logits among it): moex_pack and
 * moex_measure_bandwidth. A routing recorder and a moex_file belong to one
 * thread at a time too. Functions that need neither a model's threads nor a
 * context say "safe from any thread". The CPU kernels are one choice per
 * process (moex_set_isa). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOEX_VERSION_MAJOR 0
#define MOEX_VERSION_MINOR 2
#define MOEX_VERSION_PATCH 0
#define MOEX_VERSION "0.2.0"
/* The shared library is libmoex.so.MOEX_ABI: it changes when a struct or a
 * signature here does. */
#define MOEX_ABI 1

#if defined(__GNUC__)
#define MOEX_API __attribute__((visibility("default")))
#else
#define MOEX_API
#endif

typedef struct moex_model moex_model;
typedef struct moex_context moex_context;
typedef struct moex_sampler moex_sampler;
typedef struct moex_decoder moex_decoder;
typedef struct moex_file moex_file;

/* The library's version string (MOEX_VERSION of the build). */
MOEX_API const char *moex_version(void);
/* This thread's last error message ("" when none). */
MOEX_API const char *moex_last_error(void);

/* ---- CPU kernels. They are chosen once for the whole process, not per
 * model. moex_set_isa caps them at "scalar", "avx2", "avx512" or "neon" (the
 * best of those this CPU has at or below it; "avx2" leaves AVX-VNNI out
 * too); NULL or "": the best this CPU
 * has, the default. Call it before loading models: -1 while a model is
 * loaded, and for another name. Safe from any thread. */
MOEX_API int moex_set_isa(const char *isa);
/* The instruction set the kernels use now ("scalar", "avx2", ...). */
MOEX_API const char *moex_isa(void);

enum moex_log_level {
    MOEX_LOG_NOTE = 0,     /* something the user may want to know (a device not used, why) */
    MOEX_LOG_WARN = 1,     /* something went wrong but the work goes on (a pack file refused) */
};
typedef void (*moex_log_fn)(void *user, enum moex_log_level level, const char *message);
/* Long start-up work (packing experts for a device): done of total, after
 * each step; done == total at the end. */
typedef void (*moex_progress_fn)(void *user, const char *label, uint64_t done, uint64_t total);

/* Where the MoE experts run. */
struct moex_device_params {
    const char *device;        /* "none" (default: CPU kernels), "cpu", "amx", "sim", "auto" */
    uint64_t hot_budget;       /* device bytes, when hot_fraction is 0: staging first, then the backbone
                                  (dense matmuls), then experts */
    double hot_fraction;       /* > 0: that share (at most 1) of all experts' device bytes, the staging
                                  and the backbone on top (default 1); outside 0..1: refused */
    int min_m;                 /* rows from which an expert goes to the device; 0: the device's figure */
    const char *stats_path;    /* routing statistics (moex profile) for the pinned experts, or NULL */
    bool no_overlap;           /* run device and CPU experts one after the other */
    const char *sim_figures;   /* sim device: "rk3588[,key=value...]", or NULL */
    const char *pack_path;     /* pack file (moex pack); NULL: MODEL.mxpk next to the model when it exists */
    bool no_pack;              /* pack experts live, whatever files exist */
    bool no_backbone;          /* only experts on the device: the dense matmuls stay on the CPU */
    bool adaptive;             /* admit experts by the CPU times measured in this run instead of a
                                  fixed cost model (results may then differ run to run) */
};

struct moex_model_params {
    const char *path;          /* GGUF file */
    bool vocab_only;           /* only the tokenizer (a GGUF without tensors loads): the text
                                  functions work, contexts cannot be made */
    int n_threads;             /* 0: physical cores */
    bool pin_threads;          /* pin worker threads to CPUs (default true) */
    bool no_interleave;        /* keep the file's row layout: no interleaved copies of the Q4_K/Q6_K
                                  weights for this CPU's kernels (default: interleaved where it has them) */
    struct moex_device_params device;
    moex_log_fn log;           /* NULL: notes are dropped */
    moex_progress_fn progress; /* NULL: no progress */
    void *user;                /* passed to log and progress */
};

/* Fills the defaults. */
MOEX_API void moex_model_params_default(struct moex_model_params *p);
/* 0 when spec is figures the sim device takes ("rk3588[,key=value...]");
 * -1 with an error naming the bad key or value. Safe from any thread. */
MOEX_API int moex_check_sim_figures(const char *spec);
/* Loads and validates the model and starts its threads. NULL on error. */
MOEX_API moex_model *moex_model_load(const struct moex_model_params *p);
MOEX_API void moex_model_free(moex_model *m);

MOEX_API const char *moex_model_name(const moex_model *m);
MOEX_API const char *moex_model_arch(const moex_model *m);
MOEX_API int moex_model_n_vocab(const moex_model *m);
MOEX_API int moex_model_n_ctx_train(const moex_model *m);
MOEX_API uint64_t moex_model_n_params(const moex_model *m);
/* What a model is made of, for benchmarks and reports. */
struct moex_model_info {
    const char *arch;                  /* "qwen3moe" */
    uint32_t file_type;                /* general.file_type (llama.cpp's numbering); UINT32_MAX when absent */
    int n_layers;
    uint64_t n_params, weight_bytes;   /* all tensors: elements, file bytes */
    uint64_t decode_bytes;             /* weight bytes one decoded token reads: every dense matrix, the
                                          routed share of the experts, one embedding row */
    int n_threads;                     /* the model's worker threads */
};
MOEX_API void moex_model_get_info(const moex_model *m, struct moex_model_info *out);
/* The pack file that belongs next to a model: MODEL.gguf -> MODEL.mxpk (or
 * .mxpk appended); -1 when it does not fit in size. */
MOEX_API int moex_pack_path_for(const char *model_path, char *out, size_t size);
/* The pack file the model's contexts fill the device and the CPU's interleaved layout from, or NULL. */
MOEX_API const char *moex_model_pack_path(const moex_model *m);
/* What a GGUF file holds, for people: header, architecture hyper-parameters,
 * metadata (long arrays and strings abbreviated unless all_metadata), a
 * tensor table and totals; malloc'd, NULL with an error for a file that
 * cannot be read or is damaged. Safe from any thread. */
MOEX_API char *moex_file_info(const char *path, bool all_metadata);

/* ---- Text. All of these need a model with a tokenizer: -1 / NULL / false
 * with an error otherwise. */
MOEX_API bool moex_model_has_tokenizer(const moex_model *m);
/* Encodes text[0..len) into out[0..max_out), BOS first when the model asks
 * for one and add_bos; parse_special: "<|im_start|>" etc. become their ids.
 * Returns the number of ids; -1 when they do not fit (the message says how
 * many are needed). */
MOEX_API int moex_tokenize(const moex_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                  int32_t *out, int max_out);
/* The same into a malloc'd array (free it); NULL on error. */
MOEX_API int32_t *moex_tokenize_alloc(const moex_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                             int *n_out);
/* The bytes of ids[0..n), NUL-terminated and malloc'd; NULL on error. */
MOEX_API char *moex_detokenize(const moex_model *m, const int32_t *ids, int n, size_t *len);
/* The bytes one token stands for (control and user-defined tokens as
 * written, "<|im_end|>"; nothing for unused ones): not NUL-terminated, may
 * end inside a UTF-8 sequence, valid as long as the model; NULL for an id
 * out of range. */
MOEX_API const char *moex_token_piece(const moex_model *m, int32_t id, size_t *len);
/* A plain text token: not control, user-defined, unknown or unused (true
 * for an id the vocabulary does not describe). */
MOEX_API bool moex_token_is_normal(const moex_model *m, int32_t id);
/* End of generation (eos, eot and the end markers). */
MOEX_API bool moex_token_is_eog(const moex_model *m, int32_t id);
MOEX_API int32_t moex_token_bos(const moex_model *m);  /* -1 when none */
MOEX_API int32_t moex_token_eos(const moex_model *m);  /* -1 when none */

/* Streaming decode: only complete UTF-8 comes out of put; flush ends it. */
MOEX_API moex_decoder *moex_decoder_new(const moex_model *m);
MOEX_API void moex_decoder_free(moex_decoder *d);
/* The text token id completes (*len bytes, valid until the next call); NULL on error. */
MOEX_API const char *moex_decoder_put(moex_decoder *d, int32_t id, size_t *len);
MOEX_API const char *moex_decoder_flush(moex_decoder *d, size_t *len);

struct moex_chat_message {
    const char *role;          /* "system", "user", "assistant" or "tool" */
    const char *content;
};
/* The conversation as the model's chat template renders it (ChatML, Qwen3;
 * an unknown template renders as ChatML), ending in the generation prompt
 * when add_generation_prompt; malloc'd. Encode it with parse_special. */
MOEX_API char *moex_chat_apply(const moex_model *m, const struct moex_chat_message *msgs, int n, bool add_generation_prompt,
                      bool enable_thinking, size_t *len);
/* Whether the model's template is one moex renders as itself (false: ChatML is used). */
MOEX_API bool moex_chat_template_known(const moex_model *m);

/* ---- Contexts. */
struct moex_context_params {
    int n_ctx;                 /* tokens; 0: min(4096, trained); at most 2^24 */
    int n_batch;               /* most tokens per forward pass; 0: 512; above n_ctx x sequences: that */
    bool kv_f32;               /* KV cache in f32 (default f16) */
    bool trace;                /* record a timeline (moex_context_write_trace) */
};
MOEX_API void moex_context_params_default(struct moex_context_params *p);
MOEX_API moex_context *moex_context_new(moex_model *m, const struct moex_context_params *p);
MOEX_API void moex_context_free(moex_context *c);
MOEX_API int moex_n_ctx(const moex_context *c);
/* Tokens the context holds (evaluated). */
MOEX_API int moex_n_past(const moex_context *c);
/* Evaluates tokens[0..n) after what the context holds; the last token's
 * logits are then moex_logits. n = 0 does nothing. -1 on error (n < 0, an
 * id outside the vocabulary, too many tokens, an evaluation that fails),
 * and then, as for every evaluating call (moex_eval_all_logits,
 * moex_prefill, moex_eval_batch): none of the call's tokens is kept, the
 * context holds what it held before, and there are no logits (moex_logits
 * NULL) until the next evaluation. */
MOEX_API int moex_eval(moex_context *c, const int32_t *tokens, int n);
/* The same, with the logits of every position into logits (n, n_vocab):
 * teacher-forced evaluation; moex_logits is then the last row. */
MOEX_API int moex_eval_all_logits(moex_context *c, const int32_t *tokens, int n, float *logits);
/* Makes the context hold exactly tokens[0..n): keeps the longest common
 * prefix of what it holds (at least one token is evaluated, for logits),
 * forgets the rest and evaluates the remainder. The conversations of a chat
 * thus cost only their new tokens. -1 on error, by moex_eval's rule: a
 * prompt refused (n <= 0, too long, an id outside the vocabulary) leaves
 * the context as it was; an evaluation that fails leaves it holding the
 * common prefix. No logits either way. */
MOEX_API int moex_prefill(moex_context *c, const int32_t *tokens, int n);
/* How many of tokens[0..n) the context holds already, from the start; -1 on error. */
MOEX_API int moex_shared_prefix(const moex_context *c, const int32_t *tokens, int n);
/* Forgets positions >= n_past. */
MOEX_API void moex_truncate(moex_context *c, int n_past);
/* (n_vocab) logits of the last evaluated token; NULL before any eval. */
MOEX_API const float *moex_logits(const moex_context *c);

/* ---- Sampling: the chain runs repetition penalty, top-k, temperature,
 * min-p, top-p, then draws (greedy when temperature <= 0). */
struct moex_sampler_params {
    float temperature;     /* <= 0: greedy */
    int top_k;             /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int repeat_last_n;     /* tokens the penalty looks back over, 0 .. 2^20 */
    uint64_t seed;
};
MOEX_API void moex_sampler_params_default(struct moex_sampler_params *p);
/* NULL with an error for parameters out of range: repeat_last_n outside
 * 0 .. 2^20, repeat_penalty not > 0, a NaN. */
MOEX_API moex_sampler *moex_sampler_new(const moex_model *m, const struct moex_sampler_params *p);
MOEX_API void moex_sampler_free(moex_sampler *s);
/* Records a token of the context (for the repetition penalty). An id
 * outside the vocabulary (< 0 or >= n_vocab) is ignored: not recorded,
 * with an error in moex_last_error(). */
MOEX_API void moex_sampler_accept(moex_sampler *s, int32_t id);
/* Draws from the context's last logits (the repetition penalty rewrites
 * them in place) and records the token; -1 on error. */
MOEX_API int32_t moex_sample(moex_sampler *s, const moex_context *c);

/* ---- Generation: prefill (with prefix reuse), then sample until an
 * end-of-generation token, max_tokens, a full context or the callback. */
enum moex_finish {
    MOEX_FINISH_LENGTH = 0,    /* max_tokens generated */
    MOEX_FINISH_EOG,           /* an end-of-generation token */
    MOEX_FINISH_CONTEXT,       /* the context is full */
    MOEX_FINISH_CALLBACK,      /* on_token returned non-zero */
};
/* Each generated token and the text it completes (empty for an
 * end-of-generation token, or when a UTF-8 sequence is unfinished); at the
 * end, id -1 with the decoder's rest when there is one. Non-zero stops. */
typedef int (*moex_token_fn)(void *user, int32_t id, const char *text, size_t len);
struct moex_generate_params {
    int max_tokens;
    bool ignore_eog;           /* go on past end-of-generation tokens */
    moex_token_fn on_token;    /* may be NULL */
    void *user;
    /* > 0: also checkpoint recurrent state at this prompt position (a chat:
     * where its generation prompt begins, which the next turn keeps), so
     * that a later prompt sharing it evaluates from there, not the start. */
    int checkpoint_at;
};
struct moex_generate_result {
    int n_prompt, n_evaluated;         /* prompt tokens; those evaluated (not reused) */
    int n_generated;                   /* tokens sampled, the end-of-generation one included */
    double prompt_s, generate_s;       /* prefill; the rest */
    enum moex_finish finish;
};
/* The prompt tokens are recorded in the sampler first. -1 on error. */
MOEX_API int moex_generate(moex_context *c, moex_sampler *s, const int32_t *prompt, int n_prompt,
                  const struct moex_generate_params *p, struct moex_generate_result *r);

/* ---- Several sequences in one context (continuous batching): one batch
 * mixes tokens of several sequences, each token tagged with its sequence, in
 * one forward pass: the weights are read once for all rows, attention and
 * recurrent state are each sequence's own. A sequence's logits are those it
 * gets evaluated alone (bit for bit where every weight type's kernel is the
 * same for one row and for several; else within about 1e-5). The
 * single-sequence functions above work on sequence 0. A context and its
 * sequences belong to one thread at a time, like any context. */
/* A context of n_seq sequences (1 to 4096) of p->n_ctx tokens each (memory:
 * n_seq times one sequence's state), one expert executor for all. NULL on
 * error. */
MOEX_API moex_context *moex_context_new_seqs(moex_model *m, const struct moex_context_params *p, int n_seq);
MOEX_API int moex_n_seq(const moex_context *c);
/* Evaluates tokens[i] after what sequence seq_ids[i] holds, for i < n; a
 * sequence's tokens go in the order given, interleaved with others' or not.
 * Each sequence in the batch then has the logits of its last token. -1 on
 * error, by moex_eval's rule: the sequences of the batch hold what they held
 * before, without logits. */
MOEX_API int moex_eval_batch(moex_context *c, const int32_t *tokens, const int32_t *seq_ids, int n);
/* (n_vocab) logits of sequence seq's last evaluated token; NULL before any. */
MOEX_API const float *moex_seq_logits(const moex_context *c, int seq);
MOEX_API int moex_seq_n_past(const moex_context *c, int seq);
/* moex_shared_prefix and moex_truncate of sequence seq. */
MOEX_API int moex_seq_shared_prefix(const moex_context *c, int seq, const int32_t *tokens, int n);
MOEX_API void moex_seq_truncate(moex_context *c, int seq, int n_past);
/* Saves sequence seq's recurrent state here, so that truncating back to here
 * is cheap (a chat turn's start); free for models without recurrent state. */
MOEX_API void moex_seq_checkpoint(moex_context *c, int seq);
/* moex_sample from sequence seq's logits. */
MOEX_API int32_t moex_sample_seq(moex_sampler *s, const moex_context *c, int seq);

/* ---- Counters of the expert executor, both phases (prefill, decode) summed. */
struct moex_counters {
    uint64_t tokens;                   /* tokens evaluated */
    uint64_t rows_device, rows_cpu;    /* routed (token, expert) rows */
    uint64_t hits, misses, fallbacks;  /* expert uses with rows >= min M */
    uint64_t resident_bytes;           /* resident device bytes: staging buffers, the backbone (dense
                                          matmuls) and experts */
    const char *device;                /* the device in use ("none" when none) */
};
MOEX_API void moex_context_counters(const moex_context *c, struct moex_counters *out);

/* ---- Per phase, everything the executor counts (moex_context_profile_text
 * prints these). Call while no other thread evaluates the context. */
enum moex_phase { MOEX_PHASE_PREFILL = 0, MOEX_PHASE_DECODE = 1 };
struct moex_phase_counters {
    uint64_t batches, rows_device, rows_cpu;   /* routed (token, expert) rows */
    uint64_t submissions, jobs;                /* device submissions; jobs: one per matrix */
    uint64_t packs, loads;                     /* experts packed live / filled from the pack file */
    uint64_t hits, misses, admissions, evictions, fallbacks;
    int64_t device_ns, cpu_ns, wall_ns;        /* the experts' time (device: busy, modelled on sim) */
    int64_t modelled_ns;                       /* wall_ns with the device's modelled times in place of
                                                  the host's simulation of them (= wall_ns elsewhere) */
};
MOEX_API void moex_context_phase_counters(const moex_context *c, enum moex_phase phase,
                                          struct moex_phase_counters *out);
/* Whether the device's times are modelled (sim), not measured. */
MOEX_API bool moex_context_device_modelled(const moex_context *c);
/* Host time (ns) spent simulating the device past its modelled time in a
 * phase, experts and dense matmuls together: a wall time less this reads as
 * the modelled run's. 0 for devices with real clocks and on the CPU. */
MOEX_API int64_t moex_context_simulated_ns(const moex_context *c, enum moex_phase phase);

/* ---- Where the time of the forward passes goes, summed over evaluations
 * since the context was made or reset (nanoseconds). Call while no other
 * thread evaluates the context. */
struct moex_op_times {
    int64_t attn_matmul, attention, router, experts, lm_head;
    int64_t shortconv;                 /* short-convolution blocks, their matmuls included (lfm2moe) */
    int64_t dense_ffn;                 /* dense FFN layers (lfm2moe's leading layers) */
    int64_t delta_net;                 /* delta-net layers between their projections (qwen35moe) */
    int64_t other;                     /* the rest: embedding, norms, residuals, ... */
    uint64_t barriers;                 /* parallel steps of the model's threads (all its contexts) */
};
MOEX_API void moex_context_op_times(const moex_context *c, struct moex_op_times *out);
MOEX_API void moex_context_reset_op_times(moex_context *c);

/* ---- The board model (sim figure board=1): what the RK3588 board would
 * take for the context's work, every op priced, not only the experts' (their
 * modelled time is moex_phase_counters.modelled_ns). Call while no other
 * thread evaluates the context. */
/* Whether the context's device is the sim with the board model. */
MOEX_API bool moex_context_has_board(const moex_context *c);
/* The board's time (ns) for n_tokens at positions n_past.. through the dense
 * matmuls, attention and lm head (the last row's); -1 with an error without
 * the board model or when out of memory. */
MOEX_API double moex_context_board_dense_ns(moex_context *c, int n_tokens, int n_past);
/* With the sim figure legacy=1 (the earlier backend's expert policy
 * replayed): expert uses so far with rows on the board's NPU (hits) and its
 * CPU (misses); both 0 otherwise. */
MOEX_API void moex_context_board_expert_uses(const moex_context *c, uint64_t *hits, uint64_t *misses);

/* ---- The machine. */
/* The CPU features moex detected ("avx2 fma f16c avx512f ..."). Safe from any thread. */
MOEX_API const char *moex_cpu_features(void);
struct moex_bandwidth {
    double best_gbps, worst_gbps;      /* 1e9 bytes per second */
    int threads, tries;
    const char *loads;                 /* "AVX-512", "AVX2" or "64-bit" */
};
/* Reads a 512 MiB buffer `tries` times with all the model's threads (one
 * thread at a time per model, as evaluation). -1 when the buffer cannot be had. */
MOEX_API int moex_measure_bandwidth(moex_model *m, int tries, struct moex_bandwidth *out);

/* ---- Memory, in bytes. Safe while no other thread evaluates the context. */
struct moex_memory {
    uint64_t kv, conv, recurrent;      /* the context's KV cache, conv and recurrent state */
    uint64_t checkpoint, scratch;      /* its recurrent-state checkpoint, its activations */
    uint64_t interleaved;              /* the model's interleaved weight copies (no_interleave: 0) */
};
MOEX_API void moex_context_memory(const moex_context *c, struct moex_memory *out);
/* Writes the timeline (moex_context_params.trace) as Chrome trace-event JSON. */
MOEX_API int moex_context_write_trace(const moex_context *c, const char *path);
/* The same into an output created earlier (moex_file_create), which it
 * commits, or discards on failure (f is freed either way). */
MOEX_API int moex_context_write_trace_file(const moex_context *c, moex_file *f);

/* ---- Profiles: what the executor did, per phase (prefill, decode). Call
 * while no other thread evaluates the context. */
/* A report for people (device, slots, pack fill, then a markdown table of
 * the phase counters and their legend); malloc'd, NULL when out of memory. */
MOEX_API char *moex_context_profile_text(const moex_context *c);
/* The executor's note (why the device is not used, a device failure while
 * running) when it has not yet gone to the model's log callback; "" when
 * none. The log callback hears start-up notes at once; this is for the end. */
MOEX_API const char *moex_context_note(const moex_context *c);

/* ---- Output files that are never seen half-written: the library writes
 * its own this way (pack files, statistics, traces, synthetic models). Bytes
 * go to a temporary beside the destination; commit renames it into place, so
 * a reader with the old file open keeps the old one; discard, or any failure,
 * removes the temporary. A destination that is not a regular file (/dev/null,
 * a pipe) is written directly. A moex_file belongs to one thread at a time. */
/* Checks the directory now, before the long work; NULL with an error naming
 * the path and the reason. */
MOEX_API moex_file *moex_file_create(const char *path);
/* Writes all n bytes; -1 with an error. */
MOEX_API int moex_file_write(moex_file *f, const void *data, size_t n);
/* Flushes, syncs and renames into place; frees f, also on failure. */
MOEX_API int moex_file_commit(moex_file *f);
/* Removes the temporary and frees f; NULL is fine. */
MOEX_API void moex_file_discard(moex_file *f);
/* Async-signal-safe, for a SIGINT/SIGTERM handler: removes the temporaries
 * of the files being written (the library's and the caller's). */
MOEX_API void moex_file_unlink_pending(void);

/* ---- Routing statistics (moex profile; docs/stats-format.md): per layer and
 * expert, how often the router chose it, with which other experts, and how
 * often choices repeat on the next tokens. A recorder watches one context's
 * evaluations and belongs to that context's thread. */
typedef struct moex_routing moex_routing;
/* Starts recording what c evaluates from now on; NULL on error. */
MOEX_API moex_routing *moex_routing_new(moex_context *c);
/* Stops recording and frees r (before its context is freed). */
MOEX_API void moex_routing_free(moex_routing *r);
/* The tokens evaluated next begin a new sequence (repeats do not span it). */
MOEX_API void moex_routing_begin_sequence(moex_routing *r);
/* Which half of the workload the tokens evaluated next belong to (0 or 1): the
 * statistics compare a hot list learned on the first half with the second. */
MOEX_API void moex_routing_set_half(moex_routing *r, int half);
/* Writes the statistics into f, which it commits (or discards on failure). */
MOEX_API int moex_routing_write(const moex_routing *r, moex_file *f);
/* A per-layer summary table for people, with its legend; malloc'd. */
MOEX_API char *moex_routing_report(const moex_routing *r);

/* ---- Pack files: the experts a model's contexts would pin on its device
 * (moex_device_params), packed once into the device's layout, for later loads
 * to fill the device from instead of packing (docs/pack-format.md). */
struct moex_pack_result {
    char device[16];           /* the device packed for */
    int experts, pinned;       /* written; of them, pinned by the plan (they come first) */
    uint64_t source_bytes;     /* GGUF bytes read by packing */
    uint64_t file_bytes;
    double pack_s, total_s;    /* in the device's pack path (modelled on sim); packing and writing */
    bool pack_modelled;
    const char *weight_type;   /* the experts' GGUF type ("Q4_K") */
    int interleaved;           /* matrices written in the CPU's interleaved layout (not with no_interleave) */
    uint64_t interleaved_bytes;
    double interleave_s;
};
/* Packs for m's device (every expert with all, else those the plan pins)
 * into f, then the model's matrices in the CPU's interleaved layout (device
 * "none": that layout only), and commits f, or discards it on failure;
 * progress ("packing experts") goes to the model's callback. Runs on the model's threads: one
 * thread at a time per model, as evaluation. -1 on error. */
MOEX_API int moex_pack(moex_model *m, bool all, moex_file *f, struct moex_pack_result *r);

/* ---- The device probe (moex probe): per weight shape (K inputs x N
 * outputs, a Q4_K weight) and rows M, the CPU path (activations quantized to
 * Q8_K once) against the device with the weight resident (int8 activations),
 * where the device starts to win, and packing (GB/s of Q4_K read) next to
 * the memory read bandwidth. It measures and asserts nothing; the report
 * (markdown) goes to write a line at a time as it is made. Device times on
 * sim are modelled. Runs its own threads; safe from any thread. */
struct moex_probe_shape {
    int K, N;                          /* K a multiple of 256 */
};
struct moex_probe_params {
    const char *device;                /* "cpu", "amx" or "sim"; NULL: amx where present, else sim */
    const struct moex_probe_shape *shapes; /* n_shapes 0: 2048x768 and 768x2048 (Qwen3-30B-A3B's experts) */
    int n_shapes;
    const int *rows;                   /* M to try; n_rows 0: 1, 8, 16, 32, 64, 128 */
    int n_rows;
    int n_threads;                     /* 0: one per physical core */
    const char *sim_figures;           /* sim: "rk3588[,key=value...]"; NULL: rk3588 */
    bool no_pack_types;                /* skip the table of host packing per source type */
    void (*write)(void *user, const char *text, size_t len);
    void *user;
};
/* 0; -2 when a shape does not fit the device (the message is "'KxN' for
 * device D (expected ...)", its envelope); -1 on another error. */
MOEX_API int moex_probe(const struct moex_probe_params *p);
/* The sim device's figures, one per line with its meaning and default. */
MOEX_API const char *moex_sim_figures_help(void);

/* ---- Synthetic models: GGUF files of any shape with random, well-scaled
 * weights and a router that prefers experts by a Zipf law per layer and keeps
 * consecutive tokens on shared experts, like a trained MoE; files that
 * llama.cpp loads too. Same parameters, same bytes. Safe from any thread. */
#define MOEX_SYNTH_DEFAULT_SKEW 0.6
#define MOEX_SYNTH_DEFAULT_LOCALITY 0.75
struct moex_synth_params {
    const char *preset;        /* NULL: arch's default preset, or "small" */
    const char *arch;          /* NULL: the preset's; else the preset must be one of it */
    const char *type;          /* "f16", "q8_0", "q4_k", "q6_k", "q4_k_m"; NULL: the preset's */
    /* The shape over the preset's; 0: the preset's. */
    int n_layers, n_embd, n_expert, n_expert_used, n_ff_exp;
    int n_head, n_head_kv, head_dim, n_vocab, n_ctx;
    double rope_base;          /* 0: the preset's */
    double skew;               /* Zipf exponent of expert popularity; < 0: MOEX_SYNTH_DEFAULT_SKEW */
    double locality;           /* 0..1: routing variation that moves slowly; < 0: the default */
    int64_t seed;              /* < 0: the default (1) */
    const char *vocab_from;    /* GGUF whose tokenizer is copied; NULL: the built-in one */
    const char *name;          /* general.name; NULL: "moex-synth" */
    int n_threads;             /* 0: one per core */
    moex_progress_fn progress; /* bytes of tensor data written; NULL: none */
    void *user;
};
/* What moex_synth_check says is wrong. */
enum moex_synth_status {
    MOEX_SYNTH_OK = 0,
    MOEX_SYNTH_BAD_ARCH,       /* an architecture synth does not write */
    MOEX_SYNTH_BAD_PRESET,     /* an unknown preset */
    MOEX_SYNTH_OTHER_ARCH,     /* a preset of another architecture than arch */
    MOEX_SYNTH_BAD_TYPE,
    MOEX_SYNTH_BAD_VOCAB,      /* n_vocab below what the built-in vocabulary needs */
    MOEX_SYNTH_BAD_SHAPE,      /* sizes that contradict each other (top-k above the experts) */
};
/* The shape a model will get. */
struct moex_synth_shape {
    const char *arch, *type;
    int n_layers, n_embd, n_expert, n_expert_used;
};
MOEX_API void moex_synth_params_default(struct moex_synth_params *p);
/* Resolves the preset and the overrides: MOEX_SYNTH_OK and the shape, or what
 * is wrong with moex_last_error() saying why. shape may be NULL. */
MOEX_API enum moex_synth_status moex_synth_check(const struct moex_synth_params *p, struct moex_synth_shape *shape);
/* Writes the model to path (moex_file: never seen half-written). -1 on error. */
MOEX_API int moex_synth_write(const struct moex_synth_params *p, const char *path);

#ifdef __cplusplus
}
#endif

#endif
