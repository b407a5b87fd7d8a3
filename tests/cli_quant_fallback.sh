#!/bin/sh
# A q4_k_m model with the rows llama-quantize moves to Q5_0 (expert down
# projections of 128 and attn_output of 320 values) runs on the CPU's
# quantized kernels and on the devices: with every expert resident from one
# row on, the sim device packs the Q5_0 experts and runs them, and gives the
# tokens of the cpu reference device.
set -u
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_quant_fallback.$$
mkdir -p "$tmp"
model=$tmp/fallback.gguf
"$MOEX_BIN" synth -o "$model" --preset small --layers 2 --expert-ffn 128 --head-dim 40 --type q4_k_m -q \
    || { echo "FAIL: synth"; exit 1; }
"$MOEX_BIN" info "$model" > "$tmp/info" 2>&1
for t in blk.0.ffn_down_exps.weight blk.0.attn_output.weight; do
    grep -q " $t  *Q5_0 " "$tmp/info" && echo "ok: $t is Q5_0" || { echo "FAIL: $t is not Q5_0"; fail=1; }
done
ids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24
run() { "$MOEX_BIN" run -m "$model" --tokens $ids -n 6 --temp 0 --print-ids "$@"; }
run > "$tmp/none" 2> "$tmp/err" && [ -s "$tmp/none" ] && echo "ok: runs on the CPU's kernels" \
    || { echo "FAIL: run"; cat "$tmp/err"; fail=1; }
run --device sim --hot-budget 100% --min-m 1 --profile > "$tmp/sim" 2> "$tmp/err" \
    || { echo "FAIL: sim run"; cat "$tmp/err"; fail=1; }
# the prefill row of the profile: rows on the device (its 2nd number); no device failures
awk -F'|' 'BEGIN { r = 1 } $2 ~ /prefill/ { gsub(/ /, "", $4); r = !($4 > 0) } END { exit r }' "$tmp/err" && echo "ok: experts ran on the sim device" \
    || { echo "FAIL: no rows on the device"; cat "$tmp/err"; fail=1; }
grep -q "device failures: 0 allocations, 0 submissions, 0 packs" "$tmp/err" \
    || { echo "FAIL: device failures"; grep failures "$tmp/err"; fail=1; }
run --device cpu --hot-budget 100% --min-m 1 > "$tmp/cpu" 2> "$tmp/err" || { echo "FAIL: cpu run"; cat "$tmp/err"; fail=1; }
cmp -s "$tmp/sim" "$tmp/cpu" && echo "ok: sim and cpu devices give the same tokens" \
    || { echo "FAIL: sim and cpu tokens differ"; fail=1; }
rm -rf "$tmp"
exit $fail
