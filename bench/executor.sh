#!/bin/sh
# The expert executor side by side in one run, on the Qwen3-30B-A3B-shaped
# 8-layer Q4_K_M synth model: every expert on the CPU (--device none) against
# a device at hot budgets 0, 25, 50 and 100% of the experts' device bytes,
# with --profile counters. Appends to bench/executor.md.
#   sh bench/executor.sh [moex] [device] [pp] [tg] [reps]
# device: amx on a machine with AMX; sim (RK3588 NPU model: its device times
# are modelled, the host computes the exact results with the int8 reference
# kernel, so its wall times are not the board's).
set -eu
MOEX=${1:-build/moex}
DEVICE=${2:-amx}
PP=${3:-512}
TG=${4:-128}
REPS=${5:-3}
DIR=${MOEX_BENCH_DIR:-/tmp/moex-bench}
MODEL=$DIR/q30b-l8-q4_k_m.gguf
mkdir -p "$DIR"
[ -f "$MODEL" ] || "$MOEX" synth --preset q30b-l8 --type q4_k_m -o "$MODEL"
[ -f "$DIR/q30b-l8.stats" ] || "$MOEX" profile -m "$MODEL" --random-tokens 2048 -o "$DIR/q30b-l8.stats" > /dev/null
OUT=bench/executor.md
{
    echo
    echo "## $(date -u +%Y-%m-%d) $DEVICE, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), pp$PP tg$TG x$REPS"
    echo
    echo '```'
    for cfg in "none 0%" "$DEVICE 0%" "$DEVICE 25%" "$DEVICE 50%" "$DEVICE 100%"; do
        set -- $cfg
        echo "--device $1 --hot-budget $2"
        "$MOEX" bench -m "$MODEL" -p "$PP" -n "$TG" -r "$REPS" --device "$1" --hot-budget "$2" \
            --stats "$DIR/q30b-l8.stats" --profile 2>&1 | grep -v '^|---'
        echo
    done
    echo '```'
} | tee -a "$OUT"
