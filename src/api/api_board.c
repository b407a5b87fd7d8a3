/* The board model for the public API: a device that prices the machine it
 * models (the sim with board=1, dev_caps.pricing) prices the context's
 * dense work from the model's shapes (src/model/board_net.h). */
#include "api/api_impl.h"

#include "dev/dev.h"
#include "model/board_net.h"

#include <stdlib.h>

static const struct dev *pricer_of(const moex_context *c) { return moe_executor_pricer(context_executor(c->ctx)); }

bool moex_context_has_board(const moex_context *c) {
    API_CHECK(c, false);
    return pricer_of(c) != NULL;
}

double moex_context_board_dense_ns(moex_context *c, int n_tokens, int n_past) {
    API_CHECK(c, -1);
    const struct dev *d = pricer_of(c);
    if (!d) return moex_errorf("the context's device has no board model (sim figure board=1)");
    if (!c->board_net) {
        struct board_net *net = calloc(1, sizeof *net);
        if (!net) return moex_errorf("out of memory");
        if (board_net_from_model(c->m->model, net) != 0) {
            board_net_free(net);
            free(net);
            return -1;
        }
        /* price what the executor placed: the backbone is resident for the
         * whole run (packed once, at start), so its matmuls are looked up once */
        const struct moe_executor *e = context_executor(c->ctx);
        for (int i = 0; i < net->n_mm; i++) net->mm[i].resident = executor_dense_resident(e, net->mm[i].data);
        net->head.resident = executor_dense_resident(e, net->head.data);
        c->board_net = net;
    }
    /* its M rule; 0 once a device error moved the run to the CPU */
    c->board_net->device_min_m = moe_executor_min_m(context_executor(c->ctx));
    return dev_caps(d)->pricing->forward_ns(d, c->board_net, n_tokens, n_past);
}

void moex_context_board_expert_uses(const moex_context *c, uint64_t *hits, uint64_t *misses) {
    API_CHECK_VOID(hits);
    API_CHECK_VOID(misses);
    *hits = *misses = 0;
    API_CHECK_VOID(c);
    const struct dev *d = pricer_of(c);
    if (d) dev_caps(d)->pricing->legacy_uses(d, hits, misses);
}

void api_board_free(moex_context *c) {
    if (!c->board_net) return;
    board_net_free(c->board_net);
    free(c->board_net);
    c->board_net = NULL;
}
