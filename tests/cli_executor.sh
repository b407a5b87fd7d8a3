#!/bin/sh
# Executor settings from the command line and the environment: strict values,
# --profile tables, a --trace file that parses as trace-event JSON, and
# devices that cannot open leaving the run on the CPU.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_executor
model=$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf
run() { "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6,7,8,9,10,11,12 -n 4 --temp 0 --print-ids "$@"; }
expect "MOEX_DEVICE=0 is an error" 2 env MOEX_DEVICE=0 "$MOEX_BIN" run -m "$model" -n 1
grep -q "MOEX_DEVICE" "$tmp/err" || { echo "FAIL: message names MOEX_DEVICE"; fail=1; }
expect "MOEX_HOT_BUDGET=lots is an error" 2 env MOEX_HOT_BUDGET=lots "$MOEX_BIN" run -m "$model" -n 1
expect "MOEX_OVERLAP=maybe is an error" 2 env MOEX_OVERLAP=maybe "$MOEX_BIN" run -m "$model" -n 1
expect "MOEX_MIN_M= is an error" 2 env MOEX_MIN_M= "$MOEX_BIN" run -m "$model" -n 1
expect "--hot-budget 150% is an error" 2 run --device sim --hot-budget 150%
expect "--device gpu is an error" 2 run --device gpu
expect "--sim with an unknown figure is an error" 2 run --device sim --sim rk3588,warp=9

# every expert resident: at this model's tiny shapes the NPU's per-job cost outweighs what a
# row saves, so a partial budget admits nothing and the device lane would be empty
expect "sim device with profile and trace" 0 run --device sim --hot-budget 100% --min-m 1 --profile --trace "$tmp/t.json"
grep -q "^| prefill |" "$tmp/err" && grep -q "^| decode |" "$tmp/err" || { echo "FAIL: no profile table"; fail=1; }
# 2 layers x (keys + values) x 4096 positions x 128 f16 values: 4 MiB; no recurrent state
grep -q "context of 4096 tokens: KV cache 4.0 MiB, conv state 0.00 MiB, recurrent state 0.00 MiB" "$tmp/err" \
    || { echo "FAIL: no state memory line"; fail=1; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"]; assert any(e.get("name")=="cpu experts" for e in ev); assert any(e.get("tid")==1 and e.get("ph")=="X" for e in ev)' "$tmp/t.json" \
    || { echo "FAIL: trace JSON"; fail=1; }
cp "$tmp/out" "$tmp/sim_ids"
expect "--sim guard=1: the device's memory guarded, the same tokens" 0 run --device sim --sim rk3588,guard=1 \
    --hot-budget 100% --min-m 1
cmp -s "$tmp/out" "$tmp/sim_ids" || { echo "FAIL: guarded sim tokens differ"; fail=1; }
# One unit: the pinned experts "packed live" at start and the table's packs
# (plus later admissions) both count experts, and the legend says so.
expect "profile with every expert resident" 0 run --device sim --hot-budget 100% --min-m 1 --profile
live=$(sed -n 's/.*pinned experts: .* \([0-9][0-9]*\) packed live.*/\1/p' "$tmp/err")
packs=$(awk -F'|' '/^\| prefill \|/ { print $8 + 0 }' "$tmp/err")
admits=$(awk -F'|' '/^\| prefill \|/ { print $12 + 0 }' "$tmp/err")
[ -n "$live" ] && [ "$live" -gt 0 ] && [ "$packs" -eq $((live + admits)) ] \
    || { echo "FAIL: $live packed live + $admits admissions, table packs $packs"; cat "$tmp/err"; fail=1; }
grep -q "packs, loads.*experts (three matrices each)" "$tmp/err" || { echo "FAIL: no unit in the legend"; fail=1; }
expect "the cpu reference device gives the sim's tokens" 0 run --device cpu --hot-budget 100% --min-m 1
cmp -s "$tmp/out" "$tmp/sim_ids" || { echo "FAIL: cpu and sim tokens differ"; fail=1; }
expect "environment equals flags" 0 env MOEX_DEVICE=sim MOEX_HOT_BUDGET=50% MOEX_MIN_M=1 "$MOEX_BIN" run -m "$model" \
    --tokens 1,2,3,4,5,6,7,8,9,10,11,12 -n 4 --temp 0 --print-ids
cmp -s "$tmp/out" "$tmp/sim_ids" || { echo "FAIL: env and flags differ"; fail=1; }
expect "adaptive placement, asked for" 0 run --device sim --hot-budget 50% --min-m 1 --adaptive-placement
expect "amx: runs (on the CPU where there is no AMX)" 0 run --device amx --profile
expect "auto" 0 run --device auto
expect "injected device fault: still an answer" 0 run --device sim --min-m 1 --sim rk3588,fail_submit=1 --profile
grep -q "device error" "$tmp/err" || { echo "FAIL: fallback not reported"; cat "$tmp/err"; fail=1; }
[ -s "$tmp/out" ] || { echo "FAIL: no tokens after the fault"; fail=1; }
# A budget over the device's windows is planned for what they hold, with a
# note, instead of turning the device off (the pool once failed with "Bad address").
expect "a budget over the window" 0 run --device sim --hot-budget 100% --min-m 1 --sim rk3588,domains=1,iova_mib=6 --profile
says "a budget over the window" "do not fit the sim device's 1 window of 6.0 MiB: planned for"
grep -q "^moex profile: device sim" "$tmp/err" || { echo "FAIL: the device is off with a budget over its window"; cat "$tmp/err"; fail=1; }
exit $fail
