/* Pauses for spin-wait loops: cpu_relax lets the sibling hyper-thread run
 * while a flag is polled; spin_pause also yields now and then, so that on
 * a busy machine whoever holds our core (perhaps the thread we wait for)
 * runs. */
#ifndef MOEX_SPIN_H
#define MOEX_SPIN_H

#include <sched.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

enum { SPIN_YIELD_EVERY = 256 };

static inline void spin_pause(unsigned *spins) {
    if (++*spins % SPIN_YIELD_EVERY == 0) sched_yield();
    else cpu_relax();
}

#endif
