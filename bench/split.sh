#!/bin/sh
# The cost of split invariance: `moex bench` of two builds on the same
# models, rounds alternating (base, new, base, new, ...) so that a shared
# machine's load falls on both; prints one line per run and, per model and
# test, the best t/s of each build and their ratio (new / base).
#
#   BASE=.../moex NEW=build/moex sh bench/split.sh MODEL.gguf...
#   ROUNDS=3 THREADS=2 PP=512 TG=64 REPS=2 (defaults)
set -eu
base=${BASE:?BASE=the moex binary of the base build}
new=${NEW:-build/moex}
rounds=${ROUNDS:-3} threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-64} reps=${REPS:-2}
[ $# -gt 0 ] || { echo "usage: BASE=... NEW=... sh bench/split.sh MODEL.gguf..." >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
    for model in "$@"; do
        for side in base new; do
            bin=$base; [ $side = new ] && bin=$new
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
echo "| model | test | base t/s (best) | new t/s (best) | new / base |"
echo "|---|---|---:|---:|---:|"
awk '{ k = $1 " " $3; if ($4 > best[k, $2]) best[k, $2] = $4; keys[k] = 1 }
     END { for (k in keys) { split(k, p, " "); b = best[k, "base"]; n = best[k, "new"];
           printf "| %s | %s | %.2f | %.2f | %.3f |\n", p[1], p[2], b, n, (b > 0 ? n / b : 0) } }' "$log" | sort
