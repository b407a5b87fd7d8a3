/* moex_tools.h: the rest of libmoex's public API, for tools and for those
 * who measure, plan or prepare rather than only generate: devices and their
 * names, the CPU kernels' choice, more about models, tokens and contexts,
 * the executor's counters and profiles, op times, the board model, memory,
 * traces, atomic output files, routing statistics, pack files, the device
 * probe and synthetic models. The `moex` tool is built on it and on moex.h,
 * which it includes; the same ABI rules hold (MOEX_ABI). */
#ifndef MOEX_TOOLS_H
#define MOEX_TOOLS_H

#include "moex.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Devices: one table of the names moex_device_params.device takes. */
struct moex_device_desc {
    const char *name;
    const char *summary;       /* one line for --help */
    bool offloads;             /* false for "none": every matmul on the CPU's kernels */
    bool takes_figures;        /* reads moex_device_params.sim_figures: the device's own options */
    const char *figures_option; /* the moex tool's option for them ("--sim", "--rknpu"), or NULL */
};
/* "none cpu amx sim auto": every name, in the table's order. Safe from any thread. */
MOEX_API const char *moex_device_names(void);
/* The entry of a name: 0, or -1 with an error listing the names. Safe from any thread. */
MOEX_API int moex_device_describe(const char *name, struct moex_device_desc *out);

/* ---- CPU kernels. They are chosen once for the whole process, not per
 * model. moex_set_isa caps them at "scalar", "avx2", "avx512" or "neon" (the
 * best of those this CPU has at or below it; "avx2" leaves AVX-VNNI out
 * too); NULL or "": the best this CPU
 * has, the default. Call it before loading models: -1 while a model is
 * loaded, and for another name. Safe from any thread. */
MOEX_API int moex_set_isa(const char *isa);
/* The instruction set the kernels use now ("scalar", "avx2", ...). */
MOEX_API const char *moex_isa(void);

/* ---- More of a model, its text and its contexts. */
/* 0 when spec is figures the sim device takes ("rk3588[,key=value...]");
 * -1 with an error naming the bad key or value. Safe from any thread. */
MOEX_API int moex_check_sim_figures(const char *spec);
MOEX_API const char *moex_model_name(const moex_model *m);
MOEX_API const char *moex_model_arch(const moex_model *m);
MOEX_API int moex_model_n_ctx_train(const moex_model *m);
MOEX_API uint64_t moex_model_n_params(const moex_model *m);
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
/* Whether the model has a tokenizer (the text functions need one). */
MOEX_API bool moex_model_has_tokenizer(const moex_model *m);
/* The bytes one token stands for (control and user-defined tokens as
 * written, "<|im_end|>"; nothing for unused ones): not NUL-terminated, may
 * end inside a UTF-8 sequence, valid as long as the model; NULL for an id
 * out of range. */
MOEX_API const char *moex_token_piece(const moex_model *m, int32_t id, size_t *len);
/* A plain text token: not control, user-defined, unknown or unused (true
 * for an id the vocabulary does not describe). */
MOEX_API bool moex_token_is_normal(const moex_model *m, int32_t id);
MOEX_API int32_t moex_token_bos(const moex_model *m);  /* -1 when none */
MOEX_API int32_t moex_token_eos(const moex_model *m);  /* -1 when none */
/* Whether the model's template is one moex renders as itself (false: ChatML is used). */
MOEX_API bool moex_chat_template_known(const moex_model *m);
/* moex_eval with the logits of every position into logits (n, n_vocab):
 * teacher-forced evaluation; moex_logits is then the last row. */
MOEX_API int moex_eval_all_logits(moex_context *c, const int32_t *tokens, int n, float *logits);
/* How many of tokens[0..n) the context holds already, from the start; -1 on error. */
MOEX_API int moex_shared_prefix(const moex_context *c, const int32_t *tokens, int n);
/* The context's length in tokens (per sequence). */
MOEX_API int moex_n_ctx(const moex_context *c);
/* Tokens sequence seq holds. */
MOEX_API int moex_seq_n_past(const moex_context *c, int seq);
/* The sequences of a context (moex_context_new_seqs). */
MOEX_API int moex_n_seq(const moex_context *c);
/* moex_shared_prefix of sequence seq. */
MOEX_API int moex_seq_shared_prefix(const moex_context *c, int seq, const int32_t *tokens, int n);
/* Saves sequence seq's recurrent state here, so that truncating back to here
 * is cheap (a chat turn's start); free for models without recurrent state. */
MOEX_API void moex_seq_checkpoint(moex_context *c, int seq);
/* Sequence dst holds what sequence src holds: its tokens, cache, recurrent
 * state and logits, as if it had evaluated them (a prompt evaluated once for
 * several continuations: the server's n > 1). -1 on a sequence out of
 * range; dst == src does nothing. */
MOEX_API int moex_seq_copy(moex_context *c, int src, int dst);

/* ---- Structured output and tool calls (moex_sampler_set_grammar takes the grammars). */
/* The GBNF (malloc'd) of the JSON values a JSON schema allows: the strict
 * subset of OpenAI's structured outputs (object with properties, required,
 * additionalProperties false; array with items, minItems, maxItems; string
 * with enum, const, minLength, maxLength, format (date, time, date-time,
 * uuid); number; integer with minimum,
 * maximum; boolean, null;
 * enum, const, anyOf, $ref into $defs); NULL schema: any JSON object. NULL
 * with an error naming the keyword of an unsupported schema. Safe from any
 * thread. */
MOEX_API char *moex_json_schema_to_grammar(const char *schema_json);
/* moex_chat_apply with tools, from the JSON of an OpenAI request:
 * tools_json its "tools" array (or NULL), tool_calls_json[i] message i's
 * "tool_calls" array (the array or an entry may be NULL), as the model's
 * template writes them (Qwen3 and Qwen3.5: <tool_call> JSON, LFM2: its
 * <|tool_call_start|> list; the "tool" role as tool responses). NULL with an
 * error for JSON that is not that. */
MOEX_API char *moex_chat_apply_tools(const moex_model *m, const struct moex_chat_message *msgs,
                                     const char *const *tool_calls_json, int n, const char *tools_json,
                                     bool add_generation_prompt, bool enable_thinking, size_t *len);
/* The GBNF (malloc'd, for moex_sampler_set_grammar) of a reply made of tool
 * calls in the template's format, each call's arguments valid for its
 * function's "parameters" schema: of the function named name (NULL: any),
 * one call, or up to 5 with parallel. NULL with an error. */
MOEX_API char *moex_chat_tool_grammar(const moex_model *m, const char *tools_json, const char *name, bool parallel);
/* The markers a tool call stands between in the template's replies
 * ("<tool_call>" "</tool_call>": one JSON object {"name", "arguments"};
 * LFM2's: a JSON array of them); false when the template has none. */
MOEX_API bool moex_chat_tool_markers(const moex_model *m, const char **open, const char **close);

/* ---- Embeddings: out (moex_model_n_embd) gets the mean over tokens[0..n)
 * of the model's final hidden state (after the output norm: what the lm head
 * reads), L2-normalised. The text is evaluated from position 0 of the
 * context's first sequence, which is left empty. These models are not
 * trained for retrieval; the vector is what their last layer holds. -1 on
 * error (more tokens than the context, an id out of range). */
MOEX_API int moex_model_n_embd(const moex_model *m);
MOEX_API int moex_embed(moex_context *c, const int32_t *tokens, int n, float *out);

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
#define MOEX_OP_KINDS_MAX 24
struct moex_op_time {
    const char *name;                  /* "attention matmuls", "attention", "router", "experts", "lm head",
                                          "short conv" (lfm2moe), "dense ffn", "delta net" (qwen35moe), ...;
                                          "other" (embedding, norms, residuals) is the last */
    bool common;                       /* every architecture has this kind (else only some do) */
    int64_t ns;
};
struct moex_op_times {
    int n;                             /* kinds of op, in the library's order */
    struct moex_op_time op[MOEX_OP_KINDS_MAX];
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
/* The programs the rknpu device runs for one W8A8 matmul of M rows by a K x N
 * weight, every command word decoded into its register's named fields
 * (docs/rknpu.md); 0, or -1 when the shape is outside the NPU's envelope. */
MOEX_API int moex_rknpu_program(int M, int K, int N, void (*write)(void *user, const char *text, size_t len),
                                void *user);
/* 0 when an rknpu option string ("fake=rocket,cores=3", docs/rknpu.md) parses, else -1. */
MOEX_API int moex_check_rknpu_options(const char *spec);

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
/* Every preset of every architecture, one line each (name, what it is). Safe from any thread. */
MOEX_API const char *moex_synth_presets(void);

#ifdef __cplusplus
}
#endif

#endif
