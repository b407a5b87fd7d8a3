#!/bin/sh
# Start-up with a pack file against packing live, side by side in one run,
# on the Qwen3-30B-A3B-shaped 8-layer Q4_K_M synth model: for each hot budget
# the pack file is written (moex pack, its time and GB/s), read once with
# cat (the disk read time of the same bytes; warm: the page cache is not
# dropped, which needs root and would slow everyone else on the machine),
# then `moex run -n 1` alternates --no-pack and --pack REPS times each.
# Prints a markdown table (median and best of the repetitions) and appends
# it to bench/pack.md.
#   sh bench/pack.sh [moex] [device] [reps] [prompt tokens]
set -eu
MOEX=${1:-build/moex}
DEVICE=${2:-cpu}
REPS=${3:-3}
PROMPT=${4:-32}
DIR=${MOEX_BENCH_DIR:-/tmp/moex-bench}
MODEL=$DIR/q30b-l8-q4_k_m.gguf
STATS=$DIR/q30b-l8.stats
mkdir -p "$DIR"
[ -f "$MODEL" ] || "$MOEX" synth --preset q30b-l8 --type q4_k_m -o "$MODEL"
[ -f "$STATS" ] || "$MOEX" profile -m "$MODEL" --random-tokens 2048 -o "$STATS" > /dev/null
TOKENS=$(seq -s, 101 $((100 + PROMPT)))
OUT=bench/pack.md
now() { date +%s%N; }
ms() { echo "$1 $2" | awk '{ printf "%.0f", ($2 - $1) / 1e6 }'; }

# One run: prints "fill_ms startup_ms prompt_ms ttft_ms wall_ms device_ms loaded packed pre_packs pre_loads".
one() {
    run0=$(now)
    "$MOEX" run -m "$MODEL" --device "$DEVICE" --tokens "$TOKENS" -n 1 --temp 0 --profile "$@" \
        > /dev/null 2> "$DIR/pack-bench.err"
    run1=$(now)
    awk -v wall="$(ms "$run0" "$run1")" '
        /^moex profile: start-up [0-9.]+ ms/ { startup = $4 }
        /^moex profile: pinned experts:/ { fill = $8; loaded = $10; split($0, a, ", "); split(a[3], b, " "); packed = b[1]
                                           if (match($0, /device time [0-9.]+/)) device = substr($0, RSTART + 12, RLENGTH - 12) }
        /^moex: prompt/ { prompt = $6 * 1000 }
        /^\| prefill \|/ { split($0, c, "|"); pre_packs = c[8] + 0; pre_loads = c[9] + 0 }
        END { printf "%.0f %.0f %.0f %.0f %d %.0f %d %d %d %d\n", fill, startup, prompt, startup + prompt, wall,
              device, loaded, packed, pre_packs, pre_loads }' "$DIR/pack-bench.err"
}

# Median and best of a column over the repetitions in a file.
summary() { # file column
    sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { printf "%d (%d)", v[int((NR + 1) / 2)], v[1] }'
}

bench_config() { # label, budget, extra run options, extra pack options
    label=$1 budget=$2 runopt=$3 packopt=$4
    pack=$DIR/q30b-l8-$DEVICE-$(echo "$label" | tr -c 'a-z0-9\n' '-').mxpk
    t0=$(now)
    # shellcheck disable=SC2086
    "$MOEX" pack -m "$MODEL" --device "$DEVICE" --hot-budget "$budget" $runopt $packopt -o "$pack" -q
    t1=$(now)
    bytes=$(stat -c %s "$pack" 2>/dev/null || wc -c < "$pack")
    cat "$pack" > /dev/null
    t2=$(now)
    cat "$pack" > /dev/null
    t3=$(now)
    : > "$DIR/live.txt"
    : > "$DIR/file.txt"
    r=0
    while [ "$r" -lt "$REPS" ]; do
        # shellcheck disable=SC2086
        one --hot-budget "$budget" $runopt --no-pack >> "$DIR/live.txt"
        # shellcheck disable=SC2086
        one --hot-budget "$budget" $runopt --pack "$pack" >> "$DIR/file.txt"
        r=$((r + 1))
    done
    for kind in live file; do
        f=$DIR/$kind.txt
        read -r _ _ _ _ _ _ loaded packed pre_packs pre_loads < "$f"
        what=$([ "$kind" = live ] && echo "packed live" || echo "from the pack file")
        device=$([ "$DEVICE" = sim ] && echo " | $(summary "$f" 6)" || echo "")
        echo "| $label | $what | $(summary "$f" 1)$device | $(summary "$f" 2) | $(summary "$f" 3) | $(summary "$f" 4) | $(summary "$f" 5) | $loaded / $packed | $pre_loads / $pre_packs |"
    done
    empty=$([ "$DEVICE" = sim ] && echo " |" || echo "")
    echo "| $label | pack file | $(echo "$bytes" | awk '{ printf "%.2f GiB", $1 / 2^30 }'), written by moex pack in $(ms "$t0" "$t1") ms; cat reads it in $(ms "$t2" "$t3") ms warm (first cat $(ms "$t1" "$t2") ms)$empty | | | | | | |"
    rm -f "$pack"
}

{
    echo
    echo "## $(date -u +%Y-%m-%d) --device $DEVICE, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), prompt $PROMPT tokens, $REPS runs each"
    echo
    echo "Median (best) in ms. fill: the pinned experts' slots; start-up: model load, context and fill;"
    echo "TTFT: start-up + the prompt's batch (the first token); wall: the process, exit included."
    echo
    if [ "$DEVICE" = sim ]; then
        echo "fill device ms: the NPU model's time for the fill (repacking on the host at 0.79 ns per value, or"
        echo "the DMA fill of the packed bytes at 10 GB/s); the other times are this machine's."
        echo
        echo "| budget | experts | fill ms | fill device ms | start-up ms | prompt ms | TTFT ms | wall ms | pinned loaded / packed | prefill weights loaded / packed |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    else
        echo "| budget | experts | fill ms | start-up ms | prompt ms | TTFT ms | wall ms | pinned loaded / packed | prefill weights loaded / packed |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
        # The sim's 4 GiB window does not hold every expert of this model.
        bench_config "100%" 100% "" ""
    fi
    bench_config "25% + stats" 25% "--stats $STATS" ""
    bench_config "25% + stats, --all" 25% "--stats $STATS" "--all"
} | tee -a "$OUT"
rm -f "$DIR/live.txt" "$DIR/file.txt" "$DIR/pack-bench.err"
