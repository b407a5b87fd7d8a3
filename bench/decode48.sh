#!/usr/bin/env bash
# Decode of one model in moex's page layouts, side by side: the interleaved
# copies repacked at load into anonymous memory (--no-pack), mapped from a
# pack file (PACK=file.mxpk, written by `moex pack --device none`), and,
# with MOEX_BASE=another/moex, the same two for a second build. ROUNDS rounds
# alternate the variants. Next to each t/s: how much of the process's
# memory was in huge pages near the end of its run (AnonHugePages for the
# copies, FilePmdMapped for a mapped pack file, from /proc/PID/smaps_rollup),
# its resident memory and its wall time (start-up is most of it).
#
#   MODEL=/path/model.gguf [MOEX=build/moex] [MOEX_BASE=...] [PACK=...]
#   [THREADS="1 2"] [TG=128] [ROUNDS=2] [REPS=1] bash bench/decode48.sh
#
# A run needs the model's size in free memory (anonymous copies cannot be
# evicted; a mapped pack file that is evicted streams from disk): each run
# waits until MemAvailable holds the model and 1 GiB more.
set -euo pipefail

MOEX=${MOEX:-build/moex}
MODEL=${MODEL:?set MODEL to a GGUF file}
THREADS=${THREADS:-"1 2"}
TG=${TG:-128}
ROUNDS=${ROUNDS:-2}
REPS=${REPS:-1}
[ -x "$MOEX" ] || { echo "decode48.sh: no moex binary at $MOEX" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "decode48.sh: no model at $MODEL" >&2; exit 2; }
[ -z "${PACK:-}" ] || [ -f "$PACK" ] || { echo "decode48.sh: no pack file at $PACK" >&2; exit 2; }

need_kb=$(( $(stat -c %s "$MODEL") / 1024 + 1048576 ))
wait_for_memory() {
    local waited=0
    while [ "$(awk '/^MemAvailable/{print $2}' /proc/meminfo)" -lt "$need_kb" ]; do
        [ $waited -eq 0 ] && echo "decode48.sh: waiting for $((need_kb >> 20)) GiB of available memory" >&2
        sleep 10; waited=$((waited + 10))
    done
}

variants="repacked"
[ -n "${PACK:-}" ] && variants="$variants pack"
[ -n "${MOEX_BASE:-}" ] && variants="$variants base-repacked" && [ -n "${PACK:-}" ] && variants="$variants base-pack"

# One run: "t/s anon_huge_gib file_pmd_gib rss_gib wall_s" on stdout.
run_one() { # variant threads
    local bin=$MOEX args=(--no-pack)
    case $1 in base-*) bin=$MOEX_BASE ;; esac
    case $1 in pack | base-pack) args=(--pack "$PACK") ;; esac
    local out; out=$(mktemp)
    local t0=$SECONDS
    "$bin" bench -m "$MODEL" -t "$2" -p 0 -n "$TG" -r "$REPS" --no-roofline "${args[@]}" >"$out" 2>&1 &
    local pid=$! last="0 0 0"
    while kill -0 $pid 2>/dev/null; do
        local s; s=$(awk '/^AnonHugePages|^FilePmdMapped|^Rss/{v[$1] = $2 / 1048576}
            END { if (v["Rss:"] > 0) printf "%.2f %.2f %.2f", v["AnonHugePages:"], v["FilePmdMapped:"], v["Rss:"] }' \
            /proc/$pid/smaps_rollup 2>/dev/null || true)
        [ -n "$s" ] && last=$s
        sleep 2
    done
    wait $pid || { echo "decode48.sh: $1 failed:" >&2; tail -3 "$out" >&2; rm -f "$out"; echo "- $last -"; return; }
    local wall=$((SECONDS - t0))
    local rate; rate=$(awk -F'|' -v t="tg$TG" '{ for (i = 2; i < NF; i++) { c = $i; gsub(/ /, "", c);
        if (c == t) { v = $(i + 1); sub(/^ */, "", v); split(v, a, " "); print a[1]; exit } } }' "$out")
    rm -f "$out"
    echo "${rate:--} $last $wall"
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%F %H:%M') UTC; model $(basename "$MODEL")"
echo
echo "| round | threads | variant | tg$TG t/s | anon huge GiB | file PMD GiB | RSS GiB | wall s | load |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for round in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        for v in $variants; do
            wait_for_memory
            read -r rate huge pmd rss wall < <(run_one "$v" "$t")
            echo "| $round | $t | $v | $rate | $huge | $pmd | $rss | $wall | $(cut -d' ' -f1 /proc/loadavg) |"
        done
    done
done
