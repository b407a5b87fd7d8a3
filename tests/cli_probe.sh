#!/bin/sh
# moex probe: a table per shape with the CPU and the device side by side,
# the crossover line and the bandwidth line; bad shapes and devices are errors.
set -u
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_probe.$$
mkdir -p "$tmp"
"$MOEX_BIN" probe --device sim --shape 256x256 --shape 512x256 --m 1,16 -t 1 --no-pack-types > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: probe exit $rc"; cat "$tmp/err"; fail=1; }
for want in '### 256 x 256' '### 512 x 256' '| 1 |' '| 16 |' 'crossover:' 'memory read bandwidth' 'modelled'; do
    grep -qF -- "$want" "$tmp/out" || { echo "FAIL: probe output lacks '$want'"; fail=1; }
done
[ "$(grep -c '^crossover:' "$tmp/out")" -eq 2 ] || { echo "FAIL: one crossover line per shape"; fail=1; }
"$MOEX_BIN" probe --device cpu --shape 256x256 --m 4 -t 1 --no-pack-types > "$tmp/out" 2> "$tmp/err" ||
    { echo "FAIL: probe on the cpu device"; cat "$tmp/err"; fail=1; }
"$MOEX_BIN" probe --shape 100x256 > /dev/null 2>&1 && { echo "FAIL: K not a multiple of 256 accepted"; fail=1; }
"$MOEX_BIN" probe --device warp > /dev/null 2>&1 && { echo "FAIL: unknown device accepted"; fail=1; }
"$MOEX_BIN" probe --m 0 > /dev/null 2>&1 && { echo "FAIL: --m 0 accepted"; fail=1; }
[ $fail -eq 0 ] && echo "ok: probe"
rm -rf "$tmp"
exit $fail
