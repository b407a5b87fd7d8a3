#!/bin/sh
# Dense matmuls in --profile: on the sim at prefill the attention
# projections and the lm head (every position's logits: moex eval) run on
# the device when resident, at decode on the CPU; a budget that holds only
# the staging buffers and part of the backbone leaves the rest on the CPU.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_dense.$$
mkdir -p "$tmp"
model=$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf
ids=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
# column of a dense table row: | matmul | phase | resident | MiB | rows dev | rows cpu | ...
col() { awk -F'|' -v k="$1" -v p="$2" -v c="$3" '$2 == " " k " " && $3 == " " p " " { print $c + 0 }' "$tmp/err"; }
expect_rows() { # kind, phase, rows on the device, rows on the CPU (- for any)
    dev=$(col "$1" "$2" 6); cpu=$(col "$1" "$2" 7)
    if [ -z "$dev" ] || [ "$dev" != "$3" ] || { [ "$4" != - ] && [ "$cpu" != "$4" ]; }; then
        echo "FAIL: $1 at $2: $dev rows on the device, $cpu on the CPU (wanted $3, $4)"; fail=1
    else echo "ok: $1 at $2: $dev on the device, $cpu on the CPU"; fi
}

"$MOEX_BIN" eval -m "$model" --device sim --profile --tokens "$ids" --logits "$tmp/l.f32" > "$tmp/out" 2> "$tmp/err" \
    || { echo "FAIL: eval on the sim"; cat "$tmp/err"; fail=1; }
grep -q "^moex profile: backbone: 9 dense matmuls packed" "$tmp/err" || { echo "FAIL: no backbone line"; fail=1; }
# 16 tokens x 2 layers through each projection; the lm head over every position once
for k in "attn q" "attn k" "attn v" "attn o"; do expect_rows "$k" prefill 32 0; done
expect_rows "lm head" prefill 16 0

"$MOEX_BIN" run -m "$model" --device sim --profile --tokens "$ids" -n 4 --temp 0 > "$tmp/out" 2> "$tmp/err" \
    || { echo "FAIL: run on the sim"; cat "$tmp/err"; fail=1; }
# decode: one row per token is under the sim's min M 8, resident or not
for k in "attn q" "attn o" "lm head"; do expect_rows "$k" decode 0 -; done
[ "$(col "lm head" decode 7)" -gt 0 ] || { echo "FAIL: no lm head rows at decode"; fail=1; }
# the prompt's lm head reads its last row only: one row, on the CPU
expect_rows "lm head" prefill 0 1

# A budget of the staging buffers alone: nothing resident, everything on the CPU.
staging=$(sed -n 's/.*device memory: staging \([0-9.]*\) MiB.*/\1/p' "$tmp/err")
[ -n "$staging" ] || { echo "FAIL: no staging line"; fail=1; staging=0; }
"$MOEX_BIN" eval -m "$model" --device sim --hot-budget "$(awk -v s="$staging" 'BEGIN { printf "%d", s * 1048576 + 4096 }')" \
    --profile --tokens "$ids" --logits "$tmp/l.f32" > "$tmp/out" 2> "$tmp/err"
for k in "attn q" "lm head"; do
    dev=$(col "$k" prefill 6)
    [ "${dev:-x}" = 0 ] || { echo "FAIL: $k on the device without a resident weight ($dev rows)"; cat "$tmp/err"; fail=1; }
done
# --no-backbone, or MOEX_BACKBONE=0: every expert resident, no dense matmul.
for how in "--no-backbone" "MOEX_BACKBONE=0"; do
    case $how in
    --*) env MOEX_BACKBONE=1 "$MOEX_BIN" eval -m "$model" --device sim --profile --tokens "$ids" \
             --logits "$tmp/l.f32" "$how" > "$tmp/out" 2> "$tmp/err" ;;
    *) env "$how" "$MOEX_BIN" eval -m "$model" --device sim --profile --tokens "$ids" \
           --logits "$tmp/l.f32" > "$tmp/out" 2> "$tmp/err" ;;
    esac || { echo "FAIL: $how: exit $?"; fail=1; }
    grep -q "backbone resident 0.0 MiB" "$tmp/err" && [ "$(col "attn q" prefill 6)" = 0 ] \
        && grep -q "16 expert slots of which 16 pinned" "$tmp/err" \
        || { echo "FAIL: $how: dense matmuls resident, or experts missing"; cat "$tmp/err"; fail=1; }
done
expect_bad() { "$@" > "$tmp/out" 2> "$tmp/err"; [ $? -eq 2 ] && grep -q MOEX_BACKBONE "$tmp/err" || { echo "FAIL: $*"; fail=1; }; }
expect_bad env MOEX_BACKBONE=maybe "$MOEX_BIN" run -m "$model" -n 1
rm -rf "$tmp"
exit $fail
