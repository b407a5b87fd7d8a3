#!/bin/sh
# Builds moex with -DMOEX_EMULATE_AVX512=ON (the AVX-512 VNNI kernels compiled
# to portable code by SIMDe, and AVX-512 reported as present) and runs the
# kernel tests, so that those kernels are checked against the scalar reference
# on x86 machines without AVX-512. In this build AVX-512 is also the active
# ISA, so the oracle logits tests (skipped without the oracle models) run the
# whole forward pass through them (test_oracle_qwen35moe: its delta-net layers
# too). The tests run as many at a time as there are CPUs. Needs SIMDe
# (Debian: libsimde-dev) and a CPU with AVX2, FMA and F16C.
# usage: tests/emulated-avx512.sh [build dir [extra cmake flags...]]
#   CI shares one build with tests/emulated-amx.sh: both get
#   -DMOEX_EMULATE_AVX512=ON -DMOEX_EMULATE_AMX=ON (an AMX machine has AVX-512).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/shell_lib.sh"
build=${1:-$src/build-emu}
[ $# -gt 0 ] && shift
oracle=${MOEX_ORACLE:-$src/../shared/oracle}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEX_EMULATE_AVX512=ON -DMOEX_WERROR=ON "$@" >/dev/null
build=$(cd "$build" && pwd)
tests="test_quant_kernels test_quant_rows test_quant_r16 test_quant_r16_widths test_quant_f32_gemm test_silu_mul test_quant_oracle test_attn_kernels test_delta_net_kernels test_oracle_logits test_oracle_qwen35moe"
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target $tests
export MOEX_ORACLE="$oracle" MOEX_TEST_TMP="$build/test-tmp"
# shellcheck disable=SC2086
run_programs "AVX-512 emulated" "$build" $tests
