/* What the rknpu device offers beyond struct dev_ops (dev_rknpu.c). */
#ifndef MOEX_DEV_RKNPU_H
#define MOEX_DEV_RKNPU_H

struct dev;
struct rknpu_fake;

/* 0 when the device's option string ("fake=rocket,cores=3,...") parses,
 * else -1 with the reason in moex_error(). */
int dev_rknpu_check_options(const char *spec);
/* The fake under an rknpu device opened with fake=..., or NULL. */
struct rknpu_fake *dev_rknpu_fake(struct dev *d);

#endif
