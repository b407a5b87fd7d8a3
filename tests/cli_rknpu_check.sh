#!/bin/sh
# bench/rknpu-check.sh on the fake rknpu driver: every expert shape of the
# three architectures equals the cpu device, the figures it writes are read
# back by the sim device, and its golden captures replay on the model.
set -u
. "$MOEX_SRC/tests/shell_lib.sh"
fail=0
cli_tmpdir rknpu_check
cli_clean_env
build=$(dirname "$MOEX_BIN")
[ -x "$build/bench_rknpu" ] || { echo "SKIP: no $build/bench_rknpu built"; exit 77; }
expect "rknpu-check.sh --fake rknpu" 0 sh "$MOEX_SRC/bench/rknpu-check.sh" --fake rknpu --m 8 --reps 1 \
    --build "$build" --out "$tmp/chk"
for want in "every result equals the cpu device's" "sim accepts them: --sim \"rk3588,submit_us=" \
    "capture-0005.bin" "rknpu check: every step passed" "rknpu 0.9.8"; do
    grep -qF -- "$want" "$tmp/out" || { echo "FAIL: no '$want' in the check's output"; cat "$tmp/out"; fail=1; }
done
grep -q "| NO |" "$tmp/out" && { echo "FAIL: a result differs"; fail=1; }
[ "$(grep -c '| yes |' "$tmp/out")" -eq 12 ] || { echo "FAIL: not 12 exact rows"; fail=1; }
exit $fail
