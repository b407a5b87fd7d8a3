#!/bin/sh
# Builds moex with -DMOEX_EMULATE_AMX=ON (dev_amx.c's tile instructions run on
# a plain C model of the tile unit, tests/emu/amx_emu.c, its AVX-512 through
# SIMDe, and AMX is reported as present) and runs what exercises the amx
# device: test_amx (tile boundaries, Qwen3 expert shapes, many jobs, 1-3
# threads, the tile unit's state), test_dev (every device against the cpu
# reference), test_executor, test_dense (dense matmuls on amx equal the
# W8A8 reference), test_packfile (AMX-tiled pack files load bit
# for bit), test_oracle_qwen35moe and test_oracle_lfm2moe (amx logits = cpu's
# on qwen35moe and lfm2moe), the executor's, qwen35moe's and lfm2moe's command
# line tests, and a model
# evaluation whose logits must equal the cpu device's bit for bit with every
# expert resident.
# The test programs run as many at a time as there are CPUs. The
# oracle-based parts are skipped without the oracle models. Needs SIMDe
# (Debian: libsimde-dev) and a CPU with AVX2, FMA and F16C.
# usage: tests/emulated-amx.sh [build dir [extra cmake flags...]]
#   e.g. tests/emulated-amx.sh build-amx-emu-asan -DMOEX_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/shell_lib.sh"
build=${1:-$src/build-amx-emu}
[ $# -gt 0 ] && shift
oracle=${MOEX_ORACLE:-$src/../shared/oracle}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEX_EMULATE_AMX=ON -DMOEX_WERROR=ON "$@" >/dev/null
build=$(cd "$build" && pwd)
tests="test_amx test_dev test_executor test_dense test_packfile test_oracle_qwen35moe test_oracle_lfm2moe"
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target $tests moex
tmp=$build/test-tmp
mkdir -p "$tmp"
export MOEX_ORACLE="$oracle" MOEX_BIN="$build/moex" MOEX_TEST_TMP="$tmp" MOEX_SRC="$src"
fail=0
report() { # name, exit status
    if [ "$2" = 77 ]; then echo "   skipped"; elif [ "$2" != 0 ]; then echo "   FAILED ($2)"; fail=1; fi
}
# shellcheck disable=SC2086
run_programs "AMX emulated" "$build" $tests || fail=1

echo "== cli_executor.sh (AMX emulated)"
rc=0
sh "$src/tests/cli_executor.sh" || rc=$?
report cli_executor "$rc"

echo "== cli_qwen35moe.sh (AMX emulated: amx gives the other devices' tokens)"
rc=0
sh "$src/tests/cli_qwen35moe.sh" || rc=$?
report cli_qwen35moe "$rc"
echo "== cli_lfm2moe.sh (AMX emulated: amx gives the cpu device's tokens)"
rc=0
sh "$src/tests/cli_lfm2moe.sh" || rc=$?
report cli_lfm2moe "$rc"

echo "== logits: amx = cpu device, every expert resident (AMX emulated)"
model=$oracle/models/qwen3moe-o1-Q4_K_M.gguf
if [ -f "$model" ]; then
    # 48 tokens in one batch: per-expert jobs of M around 16 and 32 rows;
    # the W8A8 outputs are bit-exact, so the logits must be too
    ids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24
    ids=$ids,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48
    for dev in cpu amx; do
        rc=0
        "$build/moex" eval -m "$model" --tokens "$ids" --logits "$tmp/logits.$dev" -t 2 \
            --device "$dev" --hot-budget 100% --min-m 1 --profile 2> "$tmp/logits.$dev.err" || rc=$?
        if [ "$rc" != 0 ]; then echo "   FAILED: --device $dev exit $rc"; cat "$tmp/logits.$dev.err"; fail=1; fi
    done
    if ! grep -q "device amx" "$tmp/logits.amx.err" || ! grep -q "^| prefill | [0-9]* | [1-9]" "$tmp/logits.amx.err"; then
        echo "   FAILED: the amx device ran no rows"; cat "$tmp/logits.amx.err"; fail=1
    elif ! cmp -s "$tmp/logits.cpu" "$tmp/logits.amx"; then
        echo "   FAILED: the logits differ"; fail=1
    else
        echo "   ok: $(grep "^| prefill" "$tmp/logits.amx.err")"
    fi
else
    echo "   skipped (no $model)"
fi
exit $fail
