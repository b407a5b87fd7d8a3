/* Routing statistics: per layer and expert, how often the router chose it,
 * with what weight, with which other experts, and how often a token's
 * choices repeat those of the tokens just before it. Fed by the forward
 * pass's route observer (routing_stats_observe has its shape); saved to and
 * read from the versioned file described in docs/stats-format.md, which the
 * placement planner reads. */
#ifndef MOEX_MOE_ROUTING_STATS_H
#define MOEX_MOE_ROUTING_STATS_H

#include <stdint.h>

/* Locality is measured over this many previous tokens ("within 8"). */
#define ROUTING_WINDOW 8

struct atomic_file;

struct routing_stats {
    int n_layers, n_expert, top_k;
    uint64_t n_tokens;         /* tokens observed at layer 0 */
    uint64_t n_sequences;
    uint64_t *counts;          /* (n_layers, n_expert) rows routed to the expert */
    uint64_t *counts_first;    /* (n_layers, n_expert) the same, first half of the run only */
    double *weight_sums;       /* (n_layers, n_expert) sum of the routing weights it got */
    uint64_t *coact;           /* (n_layers, n_expert, n_expert) tokens that chose both; the
                                  diagonal holds counts */
    /* (n_layers) choices by a token with a predecessor in its sequence, and
     * how many of them the predecessor also made; the same for tokens with
     * ROUTING_WINDOW predecessors and "one of them made it". */
    uint64_t *next_total, *next_hits, *window_total, *window_hits;
    char *model_name;          /* where the statistics come from (may be "") */
    /* The GGUF they were gathered on (packfile_model_identity: hash, file
     * size); 0, 0 when unknown. A reader of the statistics for a model
     * compares them with that model's (routing_stats_check_model). */
    uint64_t model_hash, model_size;

    /* Recording state (not saved). */
    int phase;                 /* 0: first half, 1: second half */
    int32_t *history;          /* (n_layers, ROUTING_WINDOW, top_k) ring of recent choices */
    uint64_t *seq_pos;         /* (n_layers) tokens seen in the current sequence */
};

/* NULL with moex_error() on bad sizes or out of memory. */
struct routing_stats *routing_stats_new(int n_layers, int n_expert, int top_k, const char *model_name);
void routing_stats_free(struct routing_stats *s);
/* Starts a new sequence: repeats are never counted across sequences. */
void routing_stats_begin_sequence(struct routing_stats *s);
/* 0 while recording the first half of a run, 1 after. */
void routing_stats_set_phase(struct routing_stats *s, int phase);
/* Records one layer's choices for n_tokens consecutive tokens (ids and
 * weights: (n_tokens, top_k)). user is the routing_stats. Ids out of range
 * are ignored. */
void routing_stats_observe(void *user, int layer, int n_tokens, int top_k, const int32_t *ids,
                           const float *weights);

/* 0, or -1 with moex_error(); the file appears whole or not at all (a file
 * already at path stays as it was on failure). */
int routing_stats_write(const struct routing_stats *s, const char *path);
/* The same into an output opened earlier (src/core/atomic_file.h): writes,
 * then commits or discards it. */
int routing_stats_write_file(const struct routing_stats *s, struct atomic_file *out);
/* NULL with moex_error() naming the file and the problem. */
struct routing_stats *routing_stats_read(const char *path);
/* 0 when s was gathered on the model of this identity and shape; else -1
 * with moex_error() naming the file (path) and what differs. */
int routing_stats_check_model(const struct routing_stats *s, const char *path, uint64_t model_hash,
                              uint64_t model_size, int n_layers, int n_expert);

/* The measures `moex profile` prints, for one layer. */
struct routing_layer_summary {
    uint64_t rows;             /* routed (token, expert) pairs */
    double top10_share;        /* share of rows taken by the top 10% of experts */
    double entropy;            /* of the experts' shares, in bits */
    double entropy_norm;       /* entropy / log2(n_expert): 1 is uniform */
    double repeat_next;        /* share of choices the previous token also made */
    double repeat_window;      /* share made by one of the previous ROUTING_WINDOW tokens */
    double hot_own;            /* share of first-half rows taken by the first half's top quarter */
    double hot_other;          /* share of second-half rows taken by that same list */
};
void routing_stats_summarize(const struct routing_stats *s, int layer, struct routing_layer_summary *out);

/* How many experts "the top 10%" is: round(n_expert / 10), at least 1. */
int routing_top10_count(int n_expert);
/* A Zipf law's share of routed rows per popularity rank (rank^-skew),
 * capped just under 1/top_k (an expert serves a token at most once) with the
 * excess spread over the rest: share[n_expert]. */
void routing_zipf_shares(int n_expert, int top_k, double skew, double *share);
/* That law's top-10% share. */
double routing_zipf_top10_share(int n_expert, int top_k, double skew);

#endif
