/* The constants of exp(x) for x <= 0 in every SIMD kernel of src/arch
 * (Cephes' expf: x = n ln2 + r with ln2 in two parts so r is exact, then a
 * degree-6 polynomial in r). One copy, so every ISA's exp gives the same
 * floats; inputs below EXPN_MIN are clamped to it (~1e-38 instead of 0). */
#ifndef MOEX_EXP_NEG_COEF_H
#define MOEX_EXP_NEG_COEF_H

#define EXPN_MIN (-87.0f)
#define EXPN_LOG2E 1.44269504088896341f
#define EXPN_LN2_HI 0.693359375f
#define EXPN_LN2_LO (-2.12194440e-4f)
#define EXPN_P0 1.9875691500e-4f
#define EXPN_P1 1.3981999507e-3f
#define EXPN_P2 8.3334519073e-3f
#define EXPN_P3 4.1665795894e-2f
#define EXPN_P4 1.6666665459e-1f
#define EXPN_P5 5.0000001201e-1f

#endif
