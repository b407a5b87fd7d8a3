#!/bin/sh
# qwen35moe from the command line: run, eval, bench, profile, pack and chat
# work on the oracle file, and every device gives the same greedy tokens
# (none: the CPU's quantized kernels; cpu, sim, amx: experts on the int8
# device path) over 16 tokens after ids-a. Random weights have near-ties: on
# the Q8_0 file the int8 path flips one after 8 tokens, so this uses Q4_K_M.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_qwen35moe
cp "$MOEX_ORACLE/qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf" "$tmp/m.gguf"
model=$tmp/m.gguf
ids=$(tr -s ' \n' ',' < "$MOEX_ORACLE/qwen35moe-o3/logits/ids-a.txt" | sed 's/,$//')
run() { "$MOEX_BIN" run -m "$model" --tokens "$ids" -n 16 --temp 0 --print-ids -t 2 "$@"; }
prints() { # description, text the last command wrote on stderr or stdout
    cat "$tmp/out" "$tmp/err" | grep -qF -- "$2" || { echo "FAIL: $1: no '$2' in:"; cat "$tmp/err"; fail=1; }
}

expect "run (text)" 0 "$MOEX_BIN" run -m "$model" -p "Hello" -n 8 --temp 0 -t 2
prints "run prints speed" "t/s"
expect "greedy run, device none" 0 run --device none
cp "$tmp/out" "$tmp/none"
[ -s "$tmp/none" ] || { echo "FAIL: no tokens"; fail=1; }
for dev in cpu sim amx; do
    expect "greedy run, device $dev" 0 run --device $dev --hot-budget 100% --min-m 1 --no-pack --profile
    cmp -s "$tmp/out" "$tmp/none" || { echo "FAIL: $dev gives other tokens:"; cat "$tmp/out" "$tmp/none"; fail=1; }
done
expect "sim at half the budget" 0 run --device sim --hot-budget 50% --min-m 1 --no-pack --profile
cmp -s "$tmp/out" "$tmp/none" || { echo "FAIL: sim 50% gives other tokens"; fail=1; }
prints "profile table" "| decode |"

expect "eval" 0 "$MOEX_BIN" eval -m "$model" --tokens 1,2,3,4,5 --logits "$tmp/logits" -t 2
size=$(wc -c < "$tmp/logits")
[ "$size" -eq $((5 * 2048 * 4)) ] || { echo "FAIL: eval wrote $size bytes"; fail=1; }

expect "bench" 0 "$MOEX_BIN" bench -m "$model" -p 16 -n 4 -r 1 -t 2 --ops
grep -q "^| qwen35moe .* | pp16 |" "$tmp/out" && grep -q "| tg4 |" "$tmp/out" || { echo "FAIL: bench table"; cat "$tmp/out"; fail=1; }
prints "bench --ops counts the delta-net layers" "pp16 per run: delta net"

expect "pack" 0 "$MOEX_BIN" pack -m "$model" --device cpu -t 2
[ -s "$tmp/m.mxpk" ] || { echo "FAIL: no pack file"; fail=1; }
expect "run from the pack file" 0 run --device cpu --hot-budget 100% --min-m 1 --profile
prints "pack file used" "loaded from $tmp/m.mxpk"
cmp -s "$tmp/out" "$tmp/none" || { echo "FAIL: tokens from the pack file differ"; fail=1; }
expect "moex profile" 0 "$MOEX_BIN" profile -m "$model" --random-tokens 256 --seq 128 -q -o "$tmp/stats" -t 2
[ -s "$tmp/stats" ] || { echo "FAIL: no routing statistics"; fail=1; }

printf "hi\nhow are you\n/exit\n" | "$MOEX_BIN" chat -m "$model" -n 4 -t 2 > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: chat"; cat "$tmp/err"; fail=1; }
[ "$(grep -c "generated" "$tmp/err")" -eq 2 ] || { echo "FAIL: chat answered $(grep -c generated "$tmp/err") of 2 turns"; cat "$tmp/err"; fail=1; }
exit $fail
