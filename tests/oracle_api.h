/* The oracle tests' way into moex: the public API (include/moex.h) only,
 * as a user has it. */
#ifndef MOEX_TEST_ORACLE_API_H
#define MOEX_TEST_ORACLE_API_H

#include "moex_tools.h"

/* An oracle model (a path inside the oracle directory) on 2 unpinned
 * threads, its experts where device says (NULL: the CPU's kernels); NULL,
 * a failed check, when it does not load. */
moex_model *oracle_model(const char *relative, const struct moex_device_params *device);
/* A context of n_ctx tokens, n_batch per pass; NULL, a failed check. */
moex_context *oracle_context(moex_model *m, int n_ctx, int n_batch);
/* (n, V) float32 logits from the oracle directory; NULL, a failed check,
 * when absent or of another size. */
float *oracle_logits(const char *relative, int n, int V);
/* Routed (token, expert) rows the context's executor has counted, both
 * phases and both sides: a measure of the tokens it evaluated. */
uint64_t oracle_routed_rows(const moex_context *c);

/* The Q4_K_M file on each device (cpu, sim, amx where it runs) with every
 * expert resident and min M 1: the logits of ids_a within llama.cpp's
 * tolerances against ref (the oracle's logits of ids_a), bit for bit the
 * cpu device's, with same_greedy the 16 greedy tokens after ids_a those of
 * device none (where int8 activations do not drift off them that soon);
 * then budgets of a half and of 1 MiB hold their resident bytes over ids_b. */
void oracle_check_devices(const char *label, const char *model, const float *ref, const int32_t *ids_a,
                          const int32_t *ids_b, int n_ids, bool same_greedy);

#endif
