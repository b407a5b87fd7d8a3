#!/bin/sh
# Builds every fuzz/fuzz_*.c target with clang, libFuzzer, ASan and UBSan,
# then runs them for SECONDS seconds of fuzzing in all (default 120), split
# evenly (at least 10 s each), so that CI's time stays bounded as targets are
# added; as many targets run at a time as there are CPUs (MOEX_FUZZ_JOBS).
# Exits non-zero if a target finds a crash. Nothing is written in the source
# tree: the build, the seeds, the growing corpora and any reproducers live
# in $MOEX_FUZZ_DIR (kept between runs so the corpora grow), else in a fresh
# temporary directory that is removed when every target passed and kept,
# with its reproducers, when one failed. A build directory configured from
# another source tree is rebuilt from scratch rather than reused.
# MOEX_FUZZ_BUILD names a build directory to use instead of $work/build (CI
# makes its clang build the fuzzers' one: configured with the flags below,
# it is reused as it is). MOEX_FUZZ_SEED fixes libFuzzer's seed, so that a
# run repeats (CI's does: a gate that passes or fails the same way on the
# same tree); unset, every run explores anew.
#   fuzz/run.sh 120
# Needs clang and Debian's libclang-rt-14-dev (libFuzzer's runtime).
set -eu
seconds=${1:-120}
case $seconds in ''|*[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${MOEX_FUZZ_DIR:-}" ]; then
    work=$MOEX_FUZZ_DIR
    case $work in "$root"|"$root"/*) echo "$0: MOEX_FUZZ_DIR must be outside the source tree" >&2; exit 2;; esac
    mkdir -p "$work"
    fresh=0
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/moex-fuzz.XXXXXX")
    fresh=1
fi
build=${MOEX_FUZZ_BUILD:-$work/build}
# A cache written for another checkout makes cmake refuse to configure.
if [ -z "${MOEX_FUZZ_BUILD:-}" ] && [ -f "$build/CMakeCache.txt" ] &&
    ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$root" "$build/CMakeCache.txt"; then
    rm -rf "$build"
fi
targets=$(cd "$root/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
n_targets=$(echo "$targets" | wc -w)
each=$((seconds / n_targets))
[ "$each" -ge 10 ] || each=10

# fuzz_one TARGET: its run, logged to $work/TARGET.log; "failed" in $work/TARGET.failed.
fuzz_one() {
    t=$1
    corpus=$work/corpus/$t
    seeds=$work/seeds/$t
    mkdir -p "$corpus" "$seeds"
    dict=
    [ -f "$root/fuzz/$t.dict" ] && dict=-dict=$root/fuzz/$t.dict
    # Model files are larger than the other inputs: the seeds are ~70 KB,
    # qwen35moe's 295 KiB (a longer seed would be cut to max_len, and a cut
    # model is only ever refused).
    max_len=16384
    case $t in fuzz_model) max_len=327680;; fuzz_tokenizer) max_len=131072;; esac
    rm -f "$work/$t.failed"
    # shellcheck disable=SC2086
    TMPDIR=$work "$build/$t" -max_total_time="$each" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        ${MOEX_FUZZ_SEED:+-seed="$MOEX_FUZZ_SEED"} \
        -print_final_stats=1 -artifact_prefix="$work/$t-" $dict "$corpus" "$seeds" > "$work/$t.log" 2>&1 ||
        echo failed > "$work/$t.failed"
}
if [ "${2:-}" = --one ]; then fuzz_one "$3"; exit 0; fi # one target, for the parallel runs below

# The library needs coverage instrumentation too (-fsanitize=fuzzer-no-link),
# or libFuzzer sees only the target's own few branches. moex itself makes
# the model seeds.
CC=${CC:-clang} cmake -S "$root" -B "$build" -DMOEX_FUZZ=ON -DMOEX_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target moex $targets

MOEX_BIN=$build/moex sh "$root/fuzz/make-corpus.sh" "$work/seeds" >/dev/null
jobs=${MOEX_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
echo "== $n_targets targets, $each s each, $jobs at a time"
export MOEX_FUZZ_DIR="$work" MOEX_FUZZ_BUILD="$build"
# shellcheck disable=SC2086
printf '%s\n' $targets | xargs -P "$jobs" -I{} sh "$root/fuzz/run.sh" "$seconds" --one {}
status=0
for t in $targets; do
    echo "== $t: $each s"
    if [ -f "$work/$t.failed" ]; then
        cat "$work/$t.log"
        echo "== $t FAILED (reproducer in $work/$t-*)" >&2
        status=1
    else
        grep '^stat::\|^#[0-9]*.*DONE\|^Done' "$work/$t.log" || true
    fi
done
if [ "$fresh" = 1 ]; then
    if [ "$status" = 0 ]; then rm -rf "$work"; else echo "== kept $work" >&2; fi
fi
exit $status
