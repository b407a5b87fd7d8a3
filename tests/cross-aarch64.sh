#!/bin/sh
# Cross-builds moex for aarch64 and runs the kernel-level tests under
# qemu-aarch64 (its default CPU has NEON dotprod), so the NEON kernels (the
# interleaved r16 ones among them, test_quant_r16: ~4 s) are
# checked against the scalar reference on an x86 machine.
# Needs gcc-aarch64-linux-gnu and qemu-user. usage: tests/cross-aarch64.sh [build dir]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-arm}
oracle=${MOEX_ORACLE:-$src/../shared/oracle}
cmake -S "$src" -B "$build" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DMOEX_WERROR=ON >/dev/null
# the tests of the layers that have architecture-specific code or byte layouts
tests="test_threadpool test_sampler test_attn_kernels test_delta_net_kernels test_model_load test_oracle_logits test_dev test_dev_gemm"
for f in "$src"/tests/test_quant_*.c "$src"/tests/test_gguf*.c; do
    [ -f "$f" ] && tests="$tests $(basename "$f" .c)"
done
cmake --build "$build" -j2 --target $tests
fail=0
for t in $tests; do
    echo "== $t (qemu-aarch64)"
    rc=0
    (cd "$build" && MOEX_ORACLE="$oracle" MOEX_TEST_TMP="$build/test-tmp" \
        qemu-aarch64 -L /usr/aarch64-linux-gnu "./$t") || rc=$?
    if [ "$rc" = 77 ]; then echo "   skipped"; elif [ "$rc" != 0 ]; then echo "   FAILED ($rc)"; fail=1; fi
done
exit $fail
