/* The OpenAI API's presence and frequency penalties and logit_bias in the
 * sampler: exact arithmetic on small logits, greedy draws. */
#include "harness.h"
#include "text/sampler.h"

#include <string.h>

static struct sampler *greedy(int n_vocab) {
    struct moex_sampler_params p;
    sampler_defaults(&p);
    p.temperature = 0;
    return sampler_new(&p, n_vocab);
}

int main(void) {
    /* presence 1: a token drawn once loses 1 at every later draw. */
    struct sampler *s = greedy(4);
    CHECK(sampler_set_penalties(s, 1.0f, 0) == 0);
    int32_t got[4];
    for (int i = 0; i < 4; i++) {
        float logits[4] = { 5.0f, 4.5f, 3.9f, 0 };
        got[i] = sampler_sample(s, logits);
    }
    /* 5 | 4.5 | 3.9, then 4 vs 3.5 vs 3.9 -> 0 again (presence counts once), then 4 vs 3.5 vs 3.9 -> 0 */
    CHECKF(got[0] == 0 && got[1] == 1 && got[2] == 0 && got[3] == 0, "presence: %d %d %d %d", got[0], got[1], got[2], got[3]);
    sampler_free(s);

    /* frequency 0.4: each draw of a token costs it 0.4 more. */
    s = greedy(3);
    CHECK(sampler_set_penalties(s, 0, 0.4f) == 0);
    int count[3] = { 0 };
    for (int i = 0; i < 10; i++) {
        float logits[3] = { 2.0f, 1.0f, -5.0f };
        count[sampler_sample(s, logits)]++;
    }
    /* token 0 is drawn while 2 - 0.4 k > 1 - 0.4 m: the two alternate after the gap of 1 closes */
    CHECKF(count[0] == 6 && count[1] == 4 && count[2] == 0, "frequency: %d %d %d", count[0], count[1], count[2]);
    sampler_free(s);

    /* logit_bias: +3 lifts token 2 over the others; -100 bans the best. */
    s = greedy(3);
    int32_t ids[2] = { 2, 0 };
    float bias[2] = { 3.0f, -100.0f };
    CHECK(sampler_set_logit_bias(s, ids, bias, 2) == 0);
    float logits[3] = { 9.0f, 1.0f, 0.5f };
    CHECK(sampler_sample(s, logits) == 2);
    CHECK(logits[0] == 9.0f - 100.0f && logits[2] == 3.5f);
    /* ids out of range and biases not finite are refused, the old biases kept */
    int32_t bad[1] = { 3 };
    float one[1] = { 1.0f };
    CHECK(sampler_set_logit_bias(s, bad, one, 1) == -1);
    bad[0] = -1;
    CHECK(sampler_set_logit_bias(s, bad, one, 1) == -1);
    float logits2[3] = { 9.0f, 1.0f, 0.5f };
    CHECK(sampler_sample(s, logits2) == 2);
    CHECK(sampler_set_penalties(s, 2.5f, 0) == -1 && sampler_set_penalties(s, 0, -2.5f) == -1);
    sampler_free(s);

    /* Tokens given to sampler_accept (the prompt) are not penalised. */
    s = greedy(2);
    CHECK(sampler_set_penalties(s, 2.0f, 2.0f) == 0);
    for (int i = 0; i < 5; i++) sampler_accept(s, 0);
    float l3[2] = { 1.0f, 0.5f };
    CHECK(sampler_sample(s, l3) == 0);
    sampler_free(s);
    return test_finish();
}
