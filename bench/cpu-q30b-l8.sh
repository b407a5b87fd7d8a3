#!/bin/sh
# CPU throughput on the Qwen3-30B-A3B-shaped 8-layer Q4_K_M model, in the
# shape of llama-bench, with the per-op split; appends the table to
# bench/cpu-q30b-l8.md. The model (3.2 GiB) is made once with moex synth and
# kept in $MOEX_BENCH_DIR (default /tmp/moex-bench).
#   sh bench/cpu-q30b-l8.sh [moex binary] [threads]
set -eu
MOEX=${1:-build/moex}
THREADS=${2:-2}
DIR=${MOEX_BENCH_DIR:-/tmp/moex-bench}
MODEL=$DIR/q30b-l8-q4_k_m.gguf
mkdir -p "$DIR"
[ -f "$MODEL" ] || "$MOEX" synth --preset q30b-l8 --type q4_k_m -o "$MODEL"
OUT=bench/cpu-q30b-l8.md
{
    echo
    echo "## $(date -u +%Y-%m-%d) $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $THREADS threads"
    echo
    echo '```'
    echo "$MOEX bench -m $MODEL -p 512 -n 128 -r 3 -t $THREADS --ops"
    echo '```'
    echo
    "$MOEX" bench -m "$MODEL" -p 512 -n 128 -r 3 -t "$THREADS" --ops 2>&1
} | tee -a "$OUT"
