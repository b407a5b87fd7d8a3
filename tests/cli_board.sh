#!/bin/sh
# moex bench on the RK3588 board model (--sim rk3588,board=1): the predicted
# t/s are the model's, the same on every run whatever the host does; the
# earlier backend's policy (legacy=1) is slower than the CPU alone; scaling
# a cut-down file to more layers slows the prediction; --ops says where the
# board's time goes; with domains=N, --profile says which window holds
# which slots. (test_board checks the calibration on the full shapes.)
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_board.$$
mkdir -p "$tmp"
model=$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf
# bench SIM [options]: prints "pp16 t/s,tg2 t/s"
bench() {
    sim=$1; shift
    "$MOEX_BIN" bench -m "$model" --device sim --sim "$sim" -p 16 -n 2 -r 2 --no-roofline "$@" > "$tmp/out" 2> "$tmp/err" \
        || { echo "FAIL: bench --sim $sim $*: exit $?"; cat "$tmp/err"; fail=1; }
    awk -F'|' '$7 ~ /pp16|tg2/ { split($8, a, " "); printf "%s%s", sep, a[1]; sep="," } END { print "" }' "$tmp/out"
}
cpu=$(bench rk3588,board=1 --hot-budget 0)
again=$(bench rk3588,board=1 --hot-budget 0)
grep -q "RK3588 board (modelled)" "$tmp/out" || { echo "FAIL: no board backend in the table"; cat "$tmp/out"; fail=1; }
[ -n "$cpu" ] && [ "$cpu" = "$again" ] && echo "ok: the prediction is deterministic ($cpu)" \
    || { echo "FAIL: two runs predicted '$cpu' and '$again'"; fail=1; }
legacy=$(bench rk3588,board=1,legacy=1,mode=single --hot-budget 0)
deep=$(bench rk3588,board=1,moe_layers=20,attn_layers=20 --hot-budget 0)
# a budget too small for anything resident prices every dense matmul on the board's CPU, as placed
none=$(bench rk3588,board=1 --hot-budget 1M)
moex=$(bench rk3588,board=1 --hot-budget 100% --min-m 1 --ops)
grep -q "pp16 per run on the board: dense matmuls, attention and lm head" "$tmp/err" \
    || { echo "FAIL: --ops has no board breakdown"; cat "$tmp/err"; fail=1; }
python3 - "$cpu" "$legacy" "$deep" "$moex" "$none" <<'PY' || fail=1
import sys
cpu, legacy, deep, moex, none = ([float(x) for x in a.split(",")] for a in sys.argv[1:])
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    return ok
good = check(legacy[0] < cpu[0] / 5 and legacy[1] < cpu[1] / 5, "legacy one submit per expert %s is far below CPU only %s" % (legacy, cpu))
# the file has 2 layers: 20 of them take nearly 10x as long (the lm head is not scaled)
good &= check(cpu[0] / 12 < deep[0] < cpu[0] / 5, "20 layers predicted %s against 2 layers %s" % (deep, cpu))
good &= check(moex != cpu, "experts on the sim change the prediction: %s vs %s" % (moex, cpu))
good &= check(none == cpu, "nothing resident at 1M is priced as the CPU alone: %s vs %s" % (none, cpu))
sys.exit(0 if good else 1)
PY
# domains=2 of 4 MiB: the staging and the slots fill window 0 before window 1 is cut into, and
# --profile says which window holds which slots
"$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6,7,8,9,10 -n 2 --temp 0 --device sim --sim rk3588,domains=2,iova_mib=4 \
    --hot-budget 100% --min-m 1 --profile > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: run with domains=2"; fail=1; }
line=$(grep "moex profile: device memory:" "$tmp/err")
case "$line" in
*"window 0: 4.0 MiB used, 0.0 free (4 staging buffers, slot codes 0-"*"window 1: "*"slot codes "*) echo "ok: $line" ;;
*) echo "FAIL: windows line: '$line'"; cat "$tmp/err"; fail=1 ;;
esac
rm -rf "$tmp"
exit $fail
