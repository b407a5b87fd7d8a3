#include "core/membw.h"

#include <immintrin.h>

uint64_t membw_read_avx512(const void *p, size_t n) {
    const __m512i *v = p;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n / 64; i += 4) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(v + i + 1));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(v + i + 2));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(v + i + 3));
    }
    uint64_t lanes[8];
    _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}
