#!/bin/sh
# The CPU's interleaved layout from a pack file against repacking it at
# start-up, side by side in one run on one model (no device): writes the
# layout with `moex pack --device none` into a scratch directory (never next
# to the model), then alternates `moex run -n 1 --no-pack` and `--pack FILE`
# REPS times each under /usr/bin/time (start-up as moex profile reports it,
# wall, user and system CPU seconds, peak RSS), and with BENCH=1 a
# `moex bench` pp/tg pair on each side (t/s and peak RSS). Prints markdown
# tables; the pack file is removed at the end unless KEEP=1.
#   MODEL=/path/model.gguf [MOEX=build/moex] [THREADS=2] [REPS=3] [BENCH=1] [PP=512] [TG=128]
#   [DIR=/tmp/moex-pack-layout] sh bench/pack-layout.sh
set -eu
MOEX=${MOEX:-build/moex}
MODEL=${MODEL:?set MODEL to a GGUF file}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
BENCH=${BENCH:-0}
PP=${PP:-512}
TG=${TG:-128}
DIR=${DIR:-/tmp/moex-pack-layout}
mkdir -p "$DIR"
PACK=$DIR/$(basename "$MODEL" .gguf).mxpk
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "pack-layout.sh: needs /usr/bin/time (GNU time)" >&2; exit 1; }

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)); threads $THREADS"
"$TIME" -f "%e %M" -o "$DIR/pack.time" "$MOEX" pack -m "$MODEL" --device none -t "$THREADS" -o "$PACK" \
    > "$DIR/pack.out"
cat "$DIR/pack.out"
echo "pack: $(awk '{ printf "%.1f s wall, peak RSS %.2f GiB", $1, $2 / 1048576 }' "$DIR/pack.time"); file $(du -h "$PACK" | cut -f1)"

# One start: prints "startup_ms wall_s user_s sys_s rss_gib".
one() {
    "$TIME" -f "%e %U %S %M" -o "$DIR/run.time" "$MOEX" run -m "$MODEL" --tokens 1,2,3,4,5,6,7,8 -n 1 --temp 0 \
        -t "$THREADS" --profile "$@" > /dev/null 2> "$DIR/run.err"
    awk '/^moex profile: start-up [0-9.]+ ms/ { s = $4 } END { printf "%.0f ", s }' "$DIR/run.err"
    awk '{ printf "%.2f %.2f %.2f %.2f\n", $1, $2, $3, $4 / 1048576 }' "$DIR/run.time"
}
: > "$DIR/live"
: > "$DIR/file"
i=0
while [ "$i" -lt "$REPS" ]; do
    one --no-pack >> "$DIR/live"
    one --pack "$PACK" >> "$DIR/file"
    i=$((i + 1))
done
med() { # file, column: median (best)
    sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { printf "%s (%s)", v[int((NR + 1) / 2)], v[1] }'
}
echo
echo "| layout | start-up ms | wall s | user s | sys s | peak RSS GiB |"
echo "|---|---:|---:|---:|---:|---:|"
for side in live file; do
    name=$([ "$side" = live ] && echo "repacked at start-up (--no-pack)" || echo "mapped from the pack file")
    echo "| $name | $(med "$DIR/$side" 1) | $(med "$DIR/$side" 2) | $(med "$DIR/$side" 3) | $(med "$DIR/$side" 4) | $(med "$DIR/$side" 5) |"
done
echo "(median (best) of $REPS starts each, alternating; \`moex run --tokens 1..8 -n 1\`)"

if [ "$BENCH" = 1 ]; then
    echo
    for side in --no-pack "--pack $PACK"; do
        echo "moex bench -p $PP -n $TG -r 1 -t $THREADS $side"
        # shellcheck disable=SC2086
        "$MOEX" bench -m "$MODEL" -p "$PP" -n "$TG" -r 1 -t "$THREADS" $side 2> /dev/null | grep -E '^\| (model|---|.*(pp|tg)[0-9])'
    done
fi
[ "${KEEP:-0}" = 1 ] || rm -f "$PACK"
