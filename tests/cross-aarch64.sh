#!/bin/sh
# Cross-builds moex for aarch64 and runs the kernel-level tests under
# qemu-aarch64 (its default CPU has NEON dotprod), so the NEON kernels (the
# interleaved r16 ones among them, test_quant_r16: ~4 s) are
# checked against the scalar reference on an x86 machine, as many tests at a
# time as there are CPUs.
# Needs gcc-aarch64-linux-gnu and qemu-user. usage: tests/cross-aarch64.sh [build dir]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/shell_lib.sh"
build=${1:-$src/build-arm}
oracle=${MOEX_ORACLE:-$src/../shared/oracle}
cmake -S "$src" -B "$build" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DMOEX_WERROR=ON >/dev/null
# the tests of the layers that have architecture-specific code or byte layouts
tests="test_threadpool test_sampler test_attn_kernels test_delta_net_kernels test_model_load test_oracle_logits test_dev test_dev_gemm test_rknpu_fake test_rknpu_replay"
for f in "$src"/tests/test_quant_*.c "$src"/tests/test_gguf*.c; do
    [ -f "$f" ] && tests="$tests $(basename "$f" .c)"
done
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target $tests
export MOEX_ORACLE="$oracle" MOEX_TEST_TMP="$build/test-tmp"
runner="qemu-aarch64 -L /usr/aarch64-linux-gnu"
# shellcheck disable=SC2086
run_programs qemu-aarch64 "$build" $tests
