/* moex: MoE LLM inference. The application header of libmoex: load a model,
 * make a context, evaluate, sample, generate. moex_tools.h (which includes
 * this one) has the rest: devices, counters and profiles, routing
 * statistics, pack files, the probe, synthetic models, file helpers.
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
#define MOEX_ABI 2

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
/* Loads and validates the model and starts its threads. NULL on error. */
MOEX_API moex_model *moex_model_load(const struct moex_model_params *p);
MOEX_API void moex_model_free(moex_model *m);

MOEX_API int moex_model_n_vocab(const moex_model *m);
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

/* ---- Text. All of these need a model with a tokenizer: -1 / NULL / false
 * with an error otherwise. */
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
/* End of generation (eos, eot and the end markers). */
MOEX_API bool moex_token_is_eog(const moex_model *m, int32_t id);

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
/* Makes the context hold exactly tokens[0..n): keeps the longest common
 * prefix of what it holds (at least one token is evaluated, for logits),
 * forgets the rest and evaluates the remainder. The conversations of a chat
 * thus cost only their new tokens. -1 on error, by moex_eval's rule: a
 * prompt refused (n <= 0, too long, an id outside the vocabulary) leaves
 * the context as it was; an evaluation that fails leaves it holding the
 * common prefix. No logits either way. */
MOEX_API int moex_prefill(moex_context *c, const int32_t *tokens, int n);
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
/* Records a token of the context (for the repetition penalty; right after
 * a draw, the grammar's next token too: moex_sampler_set_grammar). An id
 * outside the vocabulary (< 0 or >= n_vocab) is ignored: not recorded,
 * with an error in moex_last_error(). */
MOEX_API void moex_sampler_accept(moex_sampler *s, int32_t id);
/* Draws from the context's last logits (the repetition penalty rewrites
 * them in place) and records the token; -1 on error. */
MOEX_API int32_t moex_sample(moex_sampler *s, const moex_context *c);
/* The OpenAI API's presence and frequency penalties, each in [-2, 2] (0:
 * off): at every draw, the logit of each token this sampler drew before
 * (not those given to moex_sampler_accept) loses presence once and
 * frequency times its count. -1 on a value out of range. */
MOEX_API int moex_sampler_set_penalties(moex_sampler *s, float presence, float frequency);
/* Adds bias[i] to the logit of token ids[i] at every draw (OpenAI's
 * logit_bias; -100 all but bans a token); replaces earlier biases. Applied,
 * with the penalties above, before the repetition penalty. -1 on an id out
 * of range or a bias not finite (nothing changed). */
MOEX_API int moex_sampler_set_logit_bias(moex_sampler *s, const int32_t *ids, const float *bias, int n);
/* Constrains what the sampler draws to a grammar in llama.cpp's GBNF
 * (rules, alternatives, groups, * + ? {m,n}, literals, [classes], comments)
 * starting at rule root (NULL: "root"); NULL gbnf: none. A token mask
 * applies before the chain; the grammar advances with the token accepted
 * right after a draw (moex_sample does both), so prompt tokens accepted
 * before it leave it alone. End-of-generation tokens are allowed only where
 * the grammar may end; a finished grammar allows only those, so set it
 * again for each reply. -1 with an error naming the line and column. */
MOEX_API int moex_sampler_set_grammar(moex_sampler *s, const char *gbnf, const char *root);

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
/* Evaluates tokens[i] after what sequence seq_ids[i] holds, for i < n; a
 * sequence's tokens go in the order given, interleaved with others' or not.
 * Each sequence in the batch then has the logits of its last token. -1 on
 * error, by moex_eval's rule: the sequences of the batch hold what they held
 * before, without logits. */
MOEX_API int moex_eval_batch(moex_context *c, const int32_t *tokens, const int32_t *seq_ids, int n);
/* (n_vocab) logits of sequence seq's last evaluated token; NULL before any. */
MOEX_API const float *moex_seq_logits(const moex_context *c, int seq);
/* moex_truncate of sequence seq. */
MOEX_API void moex_seq_truncate(moex_context *c, int seq, int n_past);
/* moex_sample from sequence seq's logits. */
MOEX_API int32_t moex_sample_seq(moex_sampler *s, const moex_context *c, int seq);

#ifdef __cplusplus
}
#endif

#endif
