/* Grammar-constrained sampling: llama.cpp's GBNF dialect compiled to rules
 * (grammar_parse.c), an incremental matcher over bytes (grammar_match.c) and
 * the token mask of one step (grammar_mask.c).
 *
 * GBNF: `name ::= alternatives` rules, one per line (newlines inside
 * parentheses and after `::=` / `|` are fine), alternatives separated by `|`,
 * sequences of "literals" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH),
 * [character classes] with ranges and ^negation, rule names, ( groups ), `.`
 * (any character), postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`, and `#` comments.
 * The text is UTF-8; classes and `.` match code points.
 *
 * The matcher keeps every way the bytes so far can continue (parse stacks
 * that share their tails), so ambiguity costs no backtracking. Rules that may
 * recurse on their left (`a ::= a "x"` or through empty prefixes) are refused
 * when the grammar is parsed: the matcher would loop on them. */
#ifndef MOEX_TEXT_GRAMMAR_H
#define MOEX_TEXT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct grammar;

/* Compiles text with root rule `root` (NULL: "root"). NULL with moex_error()
 * naming the line and column of the problem (or the undefined rule). */
struct grammar *grammar_parse(const char *text, const char *root);
void grammar_free(struct grammar *g);
/* Rules after compilation (repetitions and groups become rules of their own). */
int grammar_n_rules(const struct grammar *g);

/* ---- The matcher: where the bytes accepted so far may go on. */
struct grammar_matcher;
struct grammar_matcher *grammar_matcher_new(const struct grammar *g);
void grammar_matcher_free(struct grammar_matcher *m);
/* Accepts bytes[0..n): 0, or -1 when the grammar cannot continue with them
 * (the matcher then stays as it was). */
int grammar_matcher_accept(struct grammar_matcher *m, const char *bytes, size_t n);
/* Whether grammar_matcher_accept would take bytes[0..n); the matcher stays as it is. */
bool grammar_matcher_check(struct grammar_matcher *m, const char *bytes, size_t n);
/* The bytes so far are a whole sentence of the grammar (no UTF-8 sequence open). */
bool grammar_matcher_can_end(const struct grammar_matcher *m);
/* Nothing more may follow (every way is complete). */
bool grammar_matcher_done(const struct grammar_matcher *m);

/* ---- Token masks. A vocabulary's byte strings are sorted into a trie once;
 * each step walks it against the matcher, checking a prefix shared by many
 * tokens once and skipping a subtree as soon as its prefix is rejected. */
enum grammar_token_kind {
    GRAMMAR_TOKEN_TEXT = 0,    /* its bytes go through the grammar */
    GRAMMAR_TOKEN_END,         /* end of generation: allowed only where the grammar may end */
    GRAMMAR_TOKEN_NEVER,       /* control tokens, unused ids: never allowed */
};
struct grammar_vocab;
/* pieces[i][0..lens[i]) are token i's bytes; a TEXT token with no bytes is never allowed. */
struct grammar_vocab *grammar_vocab_new(int n_tokens, const char *const *pieces, const size_t *lens,
                                        const uint8_t *kinds);
void grammar_vocab_free(struct grammar_vocab *v);
struct tokenizer;
/* A model's: plain and user-defined tokens are text, end-of-generation
 * tokens END, other control tokens NEVER (grammar_vocab.c). */
struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *t);
int grammar_vocab_n_tokens(const struct grammar_vocab *v);
/* Trie nodes (one per distinct non-empty prefix). */
int grammar_vocab_n_nodes(const struct grammar_vocab *v);

/* allowed[0..n_tokens) set to 1 for the tokens the grammar takes next, 0 for
 * the rest; returns how many are allowed. With none (a dead matcher), the end
 * tokens are allowed so that generation stops. -1 when out of memory. */
int grammar_mask(struct grammar_matcher *m, const struct grammar_vocab *v, uint8_t *allowed);
/* Accepts token id's bytes (an END token: nothing); -1 when the grammar
 * refuses it. */
int grammar_accept_token(struct grammar_matcher *m, const struct grammar_vocab *v, int32_t id);

/* ---- What the sampler holds: a matcher, its vocabulary (shared, not
 * owned) and the mask of the step. */
struct grammar_sampler;
/* Takes g (freed with the result, also on failure). NULL when out of memory. */
struct grammar_sampler *grammar_sampler_new(struct grammar *g, const struct grammar_vocab *v);
void grammar_sampler_free(struct grammar_sampler *gs);
/* Sets the logits of the tokens the grammar does not take to -infinity. */
int grammar_sampler_apply(struct grammar_sampler *gs, float *logits, int n_vocab);
/* The sequence took id next. -1 when the grammar refuses it: from then on
 * only end tokens are allowed. */
int grammar_sampler_accept(struct grammar_sampler *gs, int32_t id);

#endif
