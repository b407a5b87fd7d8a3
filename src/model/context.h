/* Evaluating a model: a context holds the per-layer state (KV cache for
 * attention layers, convolution and recurrent state for the others) of one
 * or more sequences, the scratch of one batch, the expert executor and the
 * op times. It is generic: the architecture's forward pass (src/arch/) does
 * the arithmetic. The single-sequence functions work on sequence 0. */
#ifndef MOEX_CONTEXT_H
#define MOEX_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

struct model;
struct threadpool;
struct moe_exec_options;
struct moe_executor;

/* Called after each MoE layer's routing with the batch's top-k choices;
 * `layer` indexes the MoE layers (model->moe), not the model's layers. */
typedef void (*route_observer_fn)(void *user, int layer, int n_tokens, int top_k,
                                  const int32_t *expert_ids /* (n_tokens, top_k) */,
                                  const float *weights /* (n_tokens, top_k) */);

enum kv_type { KV_F16 = 0, KV_F32 = 1 };

/* The longest context moex makes, and the most sequences in one (more are refused). */
#define CONTEXT_MAX_TOKENS (1 << 24)
#define CONTEXT_MAX_SEQS 4096

struct context_params {
    int n_ctx;            /* KV cache length; 0 = min(4096, trained); at most CONTEXT_MAX_TOKENS */
    int n_batch;          /* most tokens per eval call; 0 = 512; above n_ctx x sequences: that */
    enum kv_type kv_type;
    struct threadpool *pool;
    const struct moe_exec_options *experts; /* where experts run; NULL: the CPU */
    const char *pack_path; /* the CPU's interleaved layout from this pack file (moex pack); NULL: repacked */
};

struct context;

struct context *context_new(struct model *m, const struct context_params *p);
/* A context of n_seq sequences (below), each with its own n_ctx positions of
 * state; context_new makes one of 1. */
struct context *context_new_seqs(struct model *m, const struct context_params *p, int n_seq);
void context_free(struct context *c);
/* Evaluates n tokens at positions n_past.. as one batch and advances n_past.
 * logits: (n, n_vocab) when all_logits, else (n_vocab) for the last token;
 * may be NULL. Batches longer than n_batch are split. -1 on error. */
int context_eval(struct context *c, const int32_t *tokens, int n, float *logits, bool all_logits);
int context_n_past(const struct context *c);
int context_n_ctx(const struct context *c);
/* Forgets positions >= n_past (e.g. 0 to start over). The tokens before stay.
 * KV caches need nothing more; recurrent state cannot be rolled back, so it
 * is restored from the checkpoint when one lies at or before n_past (and is
 * still part of the kept tokens), else reset; the next eval first evaluates
 * again the kept tokens from there. */
void context_truncate(struct context *c, int n_past);
/* Saves the recurrent state at n_past (one checkpoint; the newest wins), so
 * that truncating back to here or later is cheap: chat calls it at turn
 * boundaries. Right after a truncation that must replay, the state is saved
 * when the next eval has replayed up to here. Free for models without
 * recurrent state. */
void context_checkpoint(struct context *c);
void context_set_route_observer(struct context *c, route_observer_fn fn, void *user);
struct model *context_model(struct context *c);
/* The expert executor (counters, device notes). */
struct moe_executor *context_executor(struct context *c);

/* ---- Several sequences in one context (n_seq > 1). A batch mixes tokens
 * of several sequences: each token carries its sequence id, and a
 * sequence's tokens go at its next positions in the order given. Every
 * matmul, norm, router and expert runs once over all rows; attention,
 * convolution and recurrent state are each sequence's own. Each row is
 * computed as if its sequence were evaluated alone, bit for bit (the
 * kernels compute every row on its own; tests/test_batch_seqs.c). */
int context_n_seq(const struct context *c);
/* Evaluates tokens[i] of sequence seq_ids[i] for i < n, split into passes of
 * at most n_batch tokens. logits: (n_seq) destinations of n_vocab floats (or
 * NULL entries); logits[s] gets the logits of the last token of sequence s
 * in the batch, the others are untouched. logits may be NULL. -1 on error
 * (the passes before the failing one are kept). */
int context_eval_seqs(struct context *c, const int32_t *tokens, const int32_t *seq_ids, int n, float *const *logits);
int context_seq_n_past(const struct context *c, int seq);
/* context_truncate and context_checkpoint for sequence seq. */
void context_seq_truncate(struct context *c, int seq, int n_past);
void context_seq_checkpoint(struct context *c, int seq);
/* Sequence dst holds what src holds (its tokens, KV rows, recurrent state
 * and checkpoint), as if it had evaluated the same tokens. -1 with
 * moex_error() for a sequence out of range. */
int context_seq_copy(struct context *c, int src, int dst);

/* Memory a context holds, per kind of state (bytes), all sequences. */
struct context_memory {
    uint64_t kv, conv, recurrent, checkpoint, scratch;
};
void context_memory(const struct context *c, struct context_memory *out);
/* Positions evaluated again after truncations (replays), in total. */
int64_t context_replayed(const struct context *c);

/* Where the time goes, accumulated over evals (nanoseconds), keyed by the
 * kind of op: a new block adds a kind here and its name in context.c's
 * table, and the public report (moex_op_times) follows. OP_OTHER is the rest
 * of the forward passes' time (embedding, norms, residuals, ...). */
enum op_kind {
    OP_ATTN_MATMUL,             /* attention's projections (a delta net's too) */
    OP_ATTENTION,
    OP_ROUTER,
    OP_EXPERTS,                 /* routed and shared experts */
    OP_LM_HEAD,
    OP_SHORTCONV,               /* short-convolution blocks, their matmuls included (lfm2moe) */
    OP_DENSE_FFN,               /* dense FFN layers (lfm2moe's leading layers) */
    OP_DELTA_NET,               /* delta-net layers between their projections: conv, gates, delta rule,
                                 * gated norm (qwen35moe; the projections are OP_ATTN_MATMUL) */
    OP_OTHER,
    OP_KINDS,
};
/* "attention matmuls", "short conv", ...; whether every architecture has the kind. */
const char *op_kind_name(enum op_kind k);
bool op_kind_common(enum op_kind k);
struct op_times {
    int64_t ns[OP_KINDS];
};
const struct op_times *context_op_times(const struct context *c);
void context_reset_op_times(struct context *c);

#endif
