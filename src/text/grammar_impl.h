/* What grammar_parse.c compiles and grammar_match.c / grammar_mask.c run. */
#ifndef MOEX_TEXT_GRAMMAR_IMPL_H
#define MOEX_TEXT_GRAMMAR_IMPL_H

#include "text/grammar.h"

#define GRAMMAR_NONE UINT32_MAX
#define GRAMMAR_MAX_CODEPOINT 0x10FFFFu

enum gelem_type {
    GE_END = 0,    /* end of a rule's last alternative */
    GE_ALT,        /* end of an alternative, another follows */
    GE_REF,        /* arg: rule */
    GE_SET,        /* arg: character set */
};

struct gelem {
    uint32_t type;
    uint32_t arg;
};

/* A character set: sorted, disjoint, non-adjacent code point ranges
 * (negated classes are stored as their complement). */
struct gset {
    uint32_t first, n;         /* ranges[first .. first + n) */
};

struct grammar {
    struct gelem *elems;       /* (n_elems) every rule's alternatives, one after another */
    uint32_t n_elems;
    uint32_t *alts;            /* (rule_alts[n_rules]) where each alternative starts, rule by rule */
    uint32_t *rule_alts;       /* (n_rules + 1) rule r's alternatives: alts[rule_alts[r] .. rule_alts[r + 1]) */
    uint32_t n_rules;
    uint32_t (*ranges)[2];     /* (n_ranges) [lo, hi] inclusive */
    struct gset *sets;         /* (n_sets) */
    uint32_t n_sets;
    uint32_t root;
};

/* Whether code point c is in set s / any of [lo, hi] is. */
bool grammar_set_has(const struct grammar *g, uint32_t set, uint32_t c);
bool grammar_set_meets(const struct grammar *g, uint32_t set, uint32_t lo, uint32_t hi);

/* ---- Parse stacks, shared: a node is a position in the rules (a GE_SET
 * element at the top of a stack, or where a rule goes on once the rule it
 * calls ends) and the node below it; nodes are unique per (pos, parent), so
 * equal stacks are equal indices. */
struct gnode {
    uint32_t pos, parent;      /* parent: GRAMMAR_NONE at the bottom */
    uint32_t next;             /* the hash bucket's next node */
    uint32_t stamp;            /* the expansion that last saw it */
};

/* A set of stacks and the UTF-8 sequence under way. */
struct gstate {
    uint32_t first, n;         /* the stacks' top nodes: arena->tops[first .. first + n) */
    bool accepting;            /* the input so far is a whole sentence */
    uint8_t utf8_need;         /* continuation bytes still to come */
    uint8_t utf8_len;          /* the whole sequence's bytes (its shortest code point: no overlong forms) */
    uint32_t utf8_value;       /* the code point's bits so far */
};

struct garena {
    struct gnode *nodes;       /* (cap) n used */
    uint32_t n, cap;
    uint32_t *buckets;         /* (n_buckets) first node of each hash chain */
    uint32_t n_buckets;
    uint32_t *tops;            /* (tops_cap) stacks of the states being built, n_tops used */
    uint32_t n_tops, tops_cap;
    uint32_t stamp;
};

struct grammar_matcher {
    const struct grammar *g;
    struct garena a;
    struct gstate cur;         /* its tops live at a.tops[0 .. cur.n) */
    uint32_t compacted;        /* nodes after the last compaction */
    uint32_t generation;       /* compactions so far: node ids of older generations mean other stacks */
};

/* The state after byte b (built at a->tops[a->n_tops..]); false when b is refused. */
bool grammar_step(const struct grammar *g, struct garena *a, const struct gstate *from, uint8_t b,
                  struct gstate *to);
/* Appends a stack top to the arena's state being built; false when out of memory. */
bool grammar_push_top(struct garena *a, uint32_t id);
/* Forgets nodes made since the arena held `keep` of them. */
void grammar_arena_rollback(struct garena *a, uint32_t keep);

#endif
