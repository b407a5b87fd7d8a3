#!/usr/bin/env bash
# moex next to llama.cpp and ik_llama.cpp on the same model, threads and
# machine: each engine runs in turn, ROUNDS rounds alternating, and one table
# gives the best t/s of each (and the range over rounds), the ratio of moex to
# each, and the weights each engine reads per second of decode next to the
# read bandwidth moex bench measured in the same run. It never builds or
# downloads anything: point it at binaries built beside the project
# (the README says how).
#
#   MODEL=/path/model.gguf [MOEX=build/moex] [LLAMA_BENCH=.../llama-bench]
#   [IK_BENCH=.../llama-bench] [IK_MODES="default rtr"] [THREADS="1 2"]
#   [PP=512] [TG=128] [ROUNDS=2] [REPS=2] [LOG_DIR=dir] [MOEX_ALT_ENV="VAR=value"]
#   [MOEX_BASE=other/build/moex] [MOEX_ARGS="--isa avx2"] bash bench/peers.sh
#
# IK_MODES: "default" runs ik_llama.cpp as it comes, "rtr" adds -rtr 1 (its
# run-time repack into row-interleaved types). PP and TG are single lengths;
# 0 skips one. Engines whose variable is unset are left out. MOEX_ALT_ENV adds
# moex run with that environment as one more engine ("moex-alt"), e.g.
# MOEX_INTERLEAVE=0 for the plain-rows kernels in the same rounds. MOEX_BASE
# adds another moex binary ("moex-base", e.g. a build of the main branch).
# MOEX_ARGS are more `moex bench` options for every moex run, e.g. --isa avx2
# to hold moex to the AVX2 kernels on a machine with more.
set -euo pipefail

MOEX=${MOEX:-build/moex}
MOEX_ARGS=${MOEX_ARGS:-}
MODEL=${MODEL:?set MODEL to a GGUF file}
THREADS=${THREADS:-"1 2"}
PP=${PP:-512}
TG=${TG:-128}
ROUNDS=${ROUNDS:-2}
REPS=${REPS:-2}
IK_MODES=${IK_MODES:-"default rtr"}
LOG_DIR=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$LOG_DIR"

[ -x "$MOEX" ] || { echo "peers.sh: no moex binary at $MOEX" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "peers.sh: no model at $MODEL" >&2; exit 2; }
for b in "${MOEX_BASE:-}" "${LLAMA_BENCH:-}" "${IK_BENCH:-}"; do
    [ -z "$b" ] || [ -x "$b" ] || { echo "peers.sh: $b is not an executable" >&2; exit 2; }
done

engines="moex"
[ -n "${MOEX_ALT_ENV:-}" ] && engines="$engines moex-alt"
[ -n "${MOEX_BASE:-}" ] && engines="$engines moex-base"
[ -n "${LLAMA_BENCH:-}" ] && engines="$engines llama.cpp"
if [ -n "${IK_BENCH:-}" ]; then
    for m in $IK_MODES; do
        case $m in
        default) engines="$engines ik_llama.cpp" ;;
        rtr) engines="$engines ik_llama.cpp-rtr" ;;
        *) echo "peers.sh: IK_MODES: unknown mode '$m'" >&2; exit 2 ;;
        esac
    done
fi

# One engine, one thread count: its llama-bench style table into a log.
run_engine() { # engine threads log
    local e=$1 t=$2 log=$3
    case $e in
    moex) "$MOEX" bench -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" $MOEX_ARGS ;;
    moex-alt) env $MOEX_ALT_ENV "$MOEX" bench -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" $MOEX_ARGS ;;
    moex-base) "$MOEX_BASE" bench -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" --no-roofline $MOEX_ARGS ;;
    llama.cpp) "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" ;;
    ik_llama.cpp) "$IK_BENCH" -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" ;;
    ik_llama.cpp-rtr) "$IK_BENCH" -m "$MODEL" -t "$t" -p "$PP" -n "$TG" -r "$REPS" -rtr 1 ;;
    esac >"$log" 2>&1 || { echo "peers.sh: $e failed, see $log" >&2; tail -5 "$log" >&2; return 1; }
}

# The mean t/s of test $2 (pp512, tg128) in a llama-bench style table: the
# cell after the one that names the test (peers add columns before it).
rate_of() { # log test
    awk -F'|' -v test="$2" '{
        for (i = 2; i < NF; i++) { c = $i; gsub(/ /, "", c); if (c == test) { v = $(i + 1); sub(/^ */, "", v); split(v, a, " "); print a[1]; exit } }
    }' "$1"
}

results="$LOG_DIR/results.txt" # engine threads test round t/s
: >"$results"
bw_best=0
for round in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        for e in $engines; do
            log="$LOG_DIR/$e-t$t-r$round.log"
            echo "round $round/$ROUNDS: $e, $t threads" >&2
            run_engine "$e" "$t" "$log"
            for test in "pp$PP" "tg$TG"; do
                [ "$test" = pp0 ] || [ "$test" = tg0 ] && continue
                r=$(rate_of "$log" "$test")
                [ -n "$r" ] || { echo "peers.sh: no $test row in $log" >&2; exit 1; }
                echo "$e $t $test $round $r" >>"$results"
            done
            if [ "$e" = moex ]; then
                for b in $(sed -n 's/^read bandwidth.*: \([0-9.]*\) GB\/s.*/\1/p' "$log"); do
                    bw_best=$(awk -v a="$bw_best" -v b="$b" 'BEGIN { print (b > a) ? b : a }')
                done
                tok_gb=$(sed -n 's/.*decode reads \([0-9.]*\) GB of weights per token.*/\1/p' "$log" | head -1)
                features=$(sed -n 's/^cpu: \(.*\), [0-9]* threads;.*/\1/p' "$log" | head -1)
                rss=$(awk -F'|' '/\| (pp|tg)[0-9]+ \|/ { v = $(NF - 1); gsub(/ |GiB/, "", v) } END { print v }' "$log")
                echo "moex-rss $t $rss" >>"$results"
            fi
        done
    done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|avx512_bf16|amx_tile|amx_int8' | tr '\n' ' ')
echo
echo "CPU: ${cpu:-unknown} ($(uname -m), $(nproc) CPUs), flags: ${flags:-none}; moex sees: $features"
echo "Model: $(basename "$MODEL"); decode reads ${tok_gb} GB of weights per token; read bandwidth (moex bench probe, best of the run): ${bw_best} GB/s"
[ -n "$MOEX_ARGS" ] && echo "moex options: $MOEX_ARGS"
[ -n "${MOEX_ALT_ENV:-}" ] && echo "moex-alt: moex with $MOEX_ALT_ENV"
[ -n "${MOEX_BASE:-}" ] && echo "moex-base: $MOEX_BASE"
echo "Rounds: $ROUNDS alternating engines, each a llama-bench style run with $REPS repetitions; t/s is the best round, range in brackets."
echo
echo "| threads | test | engine | t/s | range | moex / engine | weights GB/s | of read BW | moex peak RSS |"
echo "|---:|---|---|---:|---|---:|---:|---:|---:|"
awk -v engines="$engines" -v tok_gb="$tok_gb" -v bw="$bw_best" '
    $1 == "moex-rss" { rss[$2] = $3; next }
    { k = $2 SUBSEP $3 SUBSEP $1; if (!(k in best) || $5 > best[k]) best[k] = $5;
      if (!(k in lo) || $5 < lo[k]) lo[k] = $5; if (!(k in hi) || $5 > hi[k]) hi[k] = $5;
      if (!($2 in seen_t)) { seen_t[$2] = 1; ts[++nt] = $2 } if (!($3 in seen_x)) { seen_x[$3] = 1; xs[++nx] = $3 } }
    END {
        ne = split(engines, es, " ")
        for (i = 1; i <= nt; i++) for (j = 1; j <= nx; j++) for (m = 1; m <= ne; m++) {
            k = ts[i] SUBSEP xs[j] SUBSEP es[m]; if (!(k in best)) continue
            mo = best[ts[i] SUBSEP xs[j] SUBSEP "moex"]
            ratio = es[m] == "moex" ? "-" : sprintf("%.2fx", mo / best[k])
            gbs = "-"; share = "-"
            if (xs[j] ~ /^tg/) { gbs = sprintf("%.1f", tok_gb * best[k]); if (bw > 0) share = sprintf("%.0f%%", 100 * tok_gb * best[k] / bw) }
            printf "| %s | %s | %s | %.2f | %.2f-%.2f | %s | %s | %s | %s |\n", ts[i], xs[j], es[m], best[k], lo[k], hi[k],
                   ratio, gbs, share, es[m] == "moex" ? rss[ts[i]] " GiB" : ""
        }
    }' "$results"
echo
echo "logs: $LOG_DIR"
