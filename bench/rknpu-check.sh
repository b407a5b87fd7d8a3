#!/bin/sh
# The RK3588 NPU check and calibration, for a board owner (docs/rknpu.md):
#
#   bench/rknpu-check.sh [--fake rocket|rknpu] [--opts OPTS] [--m 1,8,64,320] [--reps N] [--build DIR] [--out DIR]
#
# 1. probes the device (`moex probe --device rknpu`: driver, version, windows);
# 2. runs the generator's programs on every expert shape of qwen3moe,
#    qwen35moe and lfm2moe at each M through the device, each result against
#    the cpu device bit for bit, timed (build/bench_rknpu);
# 3. writes OUT/rknpu-figures.txt, a --sim figures line fitted to those times,
#    and checks that the sim device reads it;
# 4. records golden captures (program + inputs + outputs of one submit per
#    shape) in OUT/captures and replays them on the register-level model
#    (build/test_rknpu_replay); copy board captures to tests/data/rknpu/ to
#    keep them in the test suite.
# Without a board, --fake runs it all on the fake kernel drivers.
# Exit status 1 when any result differs or any step fails.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build out=${TMPDIR:-/tmp}/rknpu-check.$$ opts="" m=1,8,64,320 reps=5
while [ $# -gt 0 ]; do
    case $1 in
    --fake) opts="fake=$2${opts:+,$opts}"; shift 2 ;;
    --opts) opts="${opts:+$opts,}$2"; shift 2 ;;
    --m) m=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--fake rocket|rknpu] [--opts OPTS] [--m LIST] [--reps N] [--build DIR] [--out DIR]" >&2; exit 2 ;;
    esac
done
for p in moex bench_rknpu test_rknpu_replay; do
    [ -x "$build/$p" ] || { echo "$0: no $build/$p (make all first)" >&2; exit 1; }
done
mkdir -p "$out/captures" || exit 1
fail=0
echo "# rknpu check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -srm)"
echo "## 1. probe"
"$build/moex" probe --device rknpu ${opts:+--rknpu "$opts"} --shape 2048x768 --m 1,8,64 --no-pack-types -t 1 || fail=1
echo "## 2. every shape against the cpu device"
"$build/bench_rknpu" ${opts:+--opts "$opts"} --m "$m" --reps "$reps" --figures "$out/rknpu-figures.txt" \
    --captures "$out/captures" || fail=1
echo "## 3. the figures, read back by sim"
cat "$out/rknpu-figures.txt" 2> /dev/null || fail=1
if "$build/moex" run --device sim --sim "$(cat "$out/rknpu-figures.txt")" --min-m 1 -n 2 -p Hello \
    > "$out/sim.out" 2> "$out/sim.err"; then
    echo "sim accepts them: --sim \"$(cat "$out/rknpu-figures.txt")\""
else
    echo "FAIL: sim refuses the figures:"; cat "$out/sim.err"; fail=1
fi
echo "## 4. golden captures, replayed on the model"
ls "$out/captures"
(cd "$out" && MOEX_RKNPU_CAPTURES="$out/captures" "$build/test_rknpu_replay") || fail=1
echo "output in $out"
[ $fail -eq 0 ] && echo "rknpu check: every step passed" || echo "rknpu check: FAILED"
exit $fail
