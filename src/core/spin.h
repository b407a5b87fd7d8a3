/* A pause for spin-wait loops: lets the sibling hyper-thread run and saves
 * power while a flag is polled. */
#ifndef MOEX_SPIN_H
#define MOEX_SPIN_H

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

#endif
