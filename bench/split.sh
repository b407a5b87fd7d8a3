#!/bin/sh
# The cost of split invariance: `moex bench` of two builds on the same
# models, rounds alternating (base, new, base, new, ...) so that a shared
# machine's load falls on both; prints one line per run and, per model and
# test, the best t/s of each build and their ratio (new / base).
# CPU=1: instead of t/s, the user CPU seconds of a whole `moex bench` run of
# each test alone (one warm-up and REPS runs, model loading included, the
# same for both builds), best of the rounds, and base / new: with THREADS=1
# a figure that a loaded machine disturbs far less than wall time.
#
#   BASE=.../moex NEW=build/moex sh bench/split.sh MODEL.gguf...
#   ROUNDS=3 THREADS=2 PP=512 TG=64 REPS=2 CPU=0 (defaults)
set -eu
base=${BASE:?BASE=the moex binary of the base build}
new=${NEW:-build/moex}
rounds=${ROUNDS:-3} threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-64} reps=${REPS:-2} cpu=${CPU:-0}
[ $# -gt 0 ] || { echo "usage: BASE=... NEW=... sh bench/split.sh MODEL.gguf..." >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log" "$log.t"' EXIT
# cpu_run BIN MODEL TEST ARGS...: the user CPU seconds of one moex bench run
cpu_run() {
    bin=$1 model=$2 name=$3
    shift 3
    /usr/bin/time -o "$log.t" -f %U "$bin" bench -m "$model" "$@" -r "$reps" -t "$threads" --no-roofline > /dev/null 2>&1
    echo "$(basename "$model") $side $name $(tail -1 "$log.t")" | tee -a "$log"
}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
    for model in "$@"; do
        for side in base new; do
            bin=$base; [ $side = new ] && bin=$new
            if [ "$cpu" = 1 ]; then
                cpu_run "$bin" "$model" "pp$pp" -p "$pp" -n 0
                cpu_run "$bin" "$model" "tg$tg" -p 0 -n "$tg"
                continue
            fi
            "$bin" bench -m "$model" -p "$pp" -n "$tg" -r "$reps" -t "$threads" --no-roofline 2>/dev/null |
                sed -n 's/^|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*| *\([pt][pg][0-9]*\) *| *\([0-9.]*\).*/\1 \2/p' |
                while read -r test tps; do
                    echo "$(basename "$model") $side $test $tps" | tee -a "$log"
                done
        done
    done
done
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
if [ "$cpu" = 1 ]; then
    echo "| model | test | base CPU s (best) | new CPU s (best) | base / new |"
else
    echo "| model | test | base t/s (best) | new t/s (best) | new / base |"
fi
echo "|---|---|---:|---:|---:|"
awk -v cpu="$cpu" '{ k = $1 " " $3; v = cpu == 1 ? -$4 : $4; if (!((k, $2) in best) || v > best[k, $2]) best[k, $2] = v; keys[k] = 1 }
     END { for (k in keys) { split(k, p, " "); b = best[k, "base"]; n = best[k, "new"];
           if (cpu == 1) { b = -b; n = -n; r = n > 0 ? b / n : 0 } else r = b > 0 ? n / b : 0;
           printf "| %s | %s | %.2f | %.2f | %.3f |\n", p[1], p[2], b, n, r } }' "$log" | sort
