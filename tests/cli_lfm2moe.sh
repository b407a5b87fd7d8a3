#!/bin/sh
# lfm2moe from the command line, on the oracle files (made by llama.cpp) and
# on a synthetic one: the F32 greedy continuation reproduced exactly; every
# device (none, cpu, sim, amx) gives the same greedy tokens; the resident
# bytes stay inside the hot budget; a pack file round trip gives the live
# run's tokens; run, chat, eval, bench, profile and pack work.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
o=$MOEX_ORACLE/lfm2moe-o2
[ -f "$o/models/lfm2moe-o2-F32.gguf" ] || { echo "SKIP: $o has no models"; exit 77; }
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_lfm2moe
same() { # description, file: stdout equals it (trailing newlines aside)
    [ "$(cat "$tmp/out")" = "$(cat "$2")" ] || { echo "FAIL: $1: got '$(cat "$tmp/out")', wanted '$(cat "$2")'"; fail=1; }
}

ids=$(tr -s ' \n' ',' < "$o/logits/ids-a.txt" | sed 's/^,//; s/,$//')
tr -s ' \n' ' ' < "$o/logits/o2-F32.ids-a.greedy24.txt" | sed 's/ $//' > "$tmp/want"
expect "F32 greedy continuation" 0 "$MOEX_BIN" run -m "$o/models/lfm2moe-o2-F32.gguf" --tokens "$ids" \
    --temp 0 -n 24 --print-ids --ignore-eos -t 2
same "F32 greedy continuation is llama.cpp's" "$tmp/want"

# Devices: with every expert resident and min M 1 (every routed row on the
# device) cpu, sim and amx give the same greedy tokens (their int8 results
# are bit-exact; amx where the machine has AMX, else it runs as none);
# smaller budgets answer too. (none, the CPU's own kernels, drifts from the
# int8 devices after a few tokens on this random-weight file; the oracle
# test holds every device's logits to llama.cpp's tolerances.)
cp "$o/models/lfm2moe-o2-Q4_K_M.gguf" "$tmp/m.gguf"
model=$tmp/m.gguf
run() { "$MOEX_BIN" run -m "$model" --tokens "$ids" -n 12 --temp 0 --print-ids --ignore-eos -t 2 "$@"; }
expect "device none" 0 run --device none
cp "$tmp/out" "$tmp/none"
expect "device cpu, every expert resident" 0 run --device cpu --hot-budget 100% --min-m 1 --no-pack
cp "$tmp/out" "$tmp/cpu"
expect "device sim, every expert resident" 0 run --device sim --hot-budget 100% --min-m 1 --no-pack --profile
same "device sim: the cpu device's tokens" "$tmp/cpu"
awk -F'|' '/^\| prefill \|/ { if ($4 + 0 > 0) ok = 1 } END { exit !ok }' "$tmp/err" \
    || { echo "FAIL: sim ran no rows on the device"; cat "$tmp/err"; fail=1; }
expect "device amx, every expert resident" 0 run --device amx --hot-budget 100% --min-m 1 --no-pack --profile
if grep -q "^moex profile: device none" "$tmp/err"; then same "device amx (no AMX here): none's tokens" "$tmp/none"
else same "device amx: the cpu device's tokens" "$tmp/cpu"; fi
for dev in cpu sim; do
    expect "device $dev, half the experts" 0 run --device "$dev" --hot-budget 50% --min-m 1 --no-pack
    [ -s "$tmp/out" ] || { echo "FAIL: $dev with half the experts: no tokens"; fail=1; }
done

# A pack file round trip: written next to the model, picked up, same tokens.
expect "pack" 0 "$MOEX_BIN" pack -m "$model" --device cpu -t 2
[ -f "$tmp/m.mxpk" ] || { echo "FAIL: no m.mxpk next to the model"; fail=1; }
expect "run from the pack file" 0 run --device cpu --hot-budget 100% --min-m 1 --profile
says "run from the pack file" "loaded from $tmp/m.mxpk, 0 packed live"
same "run from the pack file: the live run's tokens" "$tmp/cpu"

# The other commands.
expect "eval" 0 "$MOEX_BIN" eval -m "$model" --tokens 1,2,3,4,5 --logits "$tmp/logits" -t 2
size=$(wc -c < "$tmp/logits")
[ "$size" -eq $((5 * 2048 * 4)) ] || { echo "FAIL: eval wrote $size bytes"; fail=1; }
expect "bench" 0 "$MOEX_BIN" bench -m "$model" -p 16 -n 4 -r 1 -t 2 --ops
grep -q "^| lfm2moe .* | pp16 |" "$tmp/out" && grep -q "| tg4 |" "$tmp/out" || { echo "FAIL: bench table"; cat "$tmp/out"; fail=1; }
says "bench --ops counts the short convolutions" "pp16 per run: short conv"
expect "profile" 0 "$MOEX_BIN" profile -m "$model" --random-tokens 64 --seq 32 -o "$tmp/stats" -q -t 2
[ -s "$tmp/stats" ] || { echo "FAIL: profile wrote no statistics"; fail=1; }
expect "pack with statistics" 0 "$MOEX_BIN" pack -m "$model" --device cpu --hot-budget 50% --stats "$tmp/stats" \
    -o "$tmp/plan.mxpk" -t 2
printf 'hi\nagain\n/exit\n' | "$MOEX_BIN" chat -m "$model" -n 4 -t 2 > "$tmp/out" 2> "$tmp/err" \
    || { echo "FAIL: chat"; cat "$tmp/err"; fail=1; }
echo "ok: chat"

# A synthetic lfm2moe model runs.
expect "synth lfm2moe" 0 "$MOEX_BIN" synth --arch lfm2moe --preset lfm2-tiny -o "$tmp/synth.gguf" -t 2
expect "run the synthetic model" 0 "$MOEX_BIN" run -m "$tmp/synth.gguf" -p "Hello" -n 8 --temp 0 -t 2
exit $fail
