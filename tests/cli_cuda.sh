#!/bin/sh
# --device cuda from the command line: `moex probe --device cuda` reports the
# GPU or says why it cannot open it (a build without CUDA, no NVIDIA driver,
# no device, too old a GPU, the toolkit's stub library for a driver);
# `moex run --device cuda` runs a Q4_K_M model's experts on the GPU where
# there is one, and elsewhere says why they stay on the CPU.
set -u
. "$(dirname "$0")/shell_lib.sh"
fail=0
cli_tmpdir cli_cuda
cli_clean_env
"$MOEX_BIN" probe --device cuda --shape 256x64 --m 1,16 > "$tmp/out" 2> "$tmp/err"
rc=$?
probe_rc=$rc
if [ $rc -eq 0 ]; then
    for want in 'compute capability' 'host -> device' '| 256x64 | 1 | gemv |' '| 256x64 | 16 | gemm |'; do
        grep -qF -- "$want" "$tmp/out" && echo "ok: probe reports '$want'" || { echo "FAIL: probe lacks '$want'"; fail=1; }
    done
elif grep -qE 'probe: cuda: (this moex was built without CUDA|no NVIDIA driver|the NVIDIA driver sees no device|.*compute capability)' "$tmp/err"; then
    echo "ok: probe says why the GPU cannot open: $(cat "$tmp/err")"
else
    echo "FAIL: probe --device cuda: exit $rc without a reason"; cat "$tmp/err"; fail=1
fi
# The driver is loaded at run time: with the toolkit's stub standing for
# libcuda.so.1 every entry point resolves and cuInit's failure is explained.
stub=""
for d in "$(dirname "$(command -v nvcc 2> /dev/null || echo /nonexistent)")/../lib64/stubs" /usr/local/cuda/lib64/stubs; do
    [ -f "$d/libcuda.so" ] && { stub=$d/libcuda.so; break; }
done
if grep -q 'built without CUDA' "$tmp/err"; then
    echo "ok: (this build has no CUDA kernels: the driver's loading is checked in one that has)"
elif [ -z "$stub" ]; then
    echo "ok: (no CUDA stub library here: the driver's loading is checked where the toolkit is)"
else
    mkdir -p "$tmp/stub" && ln -sf "$stub" "$tmp/stub/libcuda.so.1"
    expect "probe with the stub library for a driver" 1 env LD_LIBRARY_PATH="$tmp/stub" "$MOEX_BIN" probe --device cuda
    says "probe with the stub library for a driver" "cuda: cuInit: "
    says "probe with the stub library for a driver" "the CUDA stub library was loaded"
fi
# With a GPU the executor places a Q4_K_M model's experts and backbone on
# it and says what the budget holds; without one it says why the experts
# stay on the CPU and gives the tokens of a run without a device.
model=$tmp/tiny.gguf
"$MOEX_BIN" synth --preset tiny --type q4_k_m -o "$model" -q || { echo "FAIL: synth"; exit 1; }
run() { "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6 -n 6 --temp 0 --print-ids "$@"; }
expect "run without a device" 0 run
cp "$tmp/out" "$tmp/none"
if [ $probe_rc -eq 0 ]; then
    expect "run --device cuda on the GPU" 0 run --device cuda --hot-budget 100%
    says "run --device cuda on the GPU" "device cuda: the budget of"
    says "run --device cuda on the GPU" "and 16 of 16 experts (100%), 16 of them pinned"
    [ "$(wc -w < "$tmp/out")" -eq 6 ] && echo "ok: six tokens from the GPU run" \
        || { echo "FAIL: the GPU run gave '$(cat "$tmp/out")'"; fail=1; }
else
    expect "run --device cuda" 0 run --device cuda --hot-budget 1G
    says "run --device cuda" "device unavailable: cuda: "
    says "run --device cuda" "experts run on the CPU"
    cmp -s "$tmp/out" "$tmp/none" && echo "ok: the same tokens as without a device" \
        || { echo "FAIL: tokens differ from the run without a device"; fail=1; }
fi
expect "an unknown device" 2 run --device gpu
says "an unknown device" "expected one of none,cpu,amx,sim,rknpu,cuda,auto"
exit $fail
