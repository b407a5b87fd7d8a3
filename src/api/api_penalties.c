/* The OpenAI API's presence and frequency penalties and logit_bias on a
 * public sampler (text/sampler.c applies them). */
#include "api/api_impl.h"

#include "text/sampler.h"

int moex_sampler_set_penalties(moex_sampler *s, float presence, float frequency) {
    API_CHECK(s, -1);
    if (sampler_set_penalties(s->s, presence, frequency))
        return moex_errorf("moex_sampler_set_penalties: %g, %g: each must be in [-2, 2]", presence, frequency), -1;
    return 0;
}

int moex_sampler_set_logit_bias(moex_sampler *s, const int32_t *ids, const float *bias, int n) {
    API_CHECK(s, -1);
    if (n > 0) API_CHECK(ids, -1);
    if (n > 0) API_CHECK(bias, -1);
    if (sampler_set_logit_bias(s->s, ids, bias, n))
        return moex_errorf("moex_sampler_set_logit_bias: a token id out of range or a bias not finite (or out of "
                           "memory)"), -1;
    return 0;
}
