#!/bin/sh
# Two moex builds side by side, op by op: for each round each binary in
# turn runs `moex bench -p P -n 0 --ops` (extra flags in ARGS, e.g.
# "--isa avx2"); one line per (binary, round) with t/s and --ops's ms per
# run, then the best round of each op for each binary, and "rest": the
# layer without the experts (attention matmuls + attention + router +
# other), with new/old ratios. The load average is printed per round.
#   sh bench/layer.sh OLD_MOEX NEW_MOEX MODEL [prompt tokens] [threads] [rounds] [ARGS]
set -eu
OLD=$1
NEW=$2
MODEL=$3
P=${4:-512}
T=${5:-2}
ROUNDS=${6:-3}
ARGS=${7:-}
ROUNDS_LOG=$(mktemp)
trap 'rm -f "$ROUNDS_LOG"' EXIT
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) logical CPUs; pp$P, $T threads $ARGS; $(date -u +%H:%M) UTC"
for r in $(seq 1 "$ROUNDS"); do
    for which in old new; do
        bin=$OLD
        [ "$which" = new ] && bin=$NEW
        load=$(cut -d' ' -f1 /proc/loadavg)
        # shellcheck disable=SC2086
        "$bin" bench -m "$MODEL" -p "$P" -n 0 -r 1 -t "$T" --ops --no-roofline $ARGS 2>&1 |
            awk -v w="$which" -v r="$r" -v load="$load" '
                /^\| .* \| pp[0-9]+ \|/ { split($0, c, "|"); split(c[8], v, " "); speed = v[1] }
                / per run: / {
                    line = $0; sub(/^.* per run: /, "", line)
                    n = split(line, parts, ", ")
                    out = ""
                    for (i = 1; i <= n; i++) {
                        name = parts[i]; sub(/ [0-9.]+ ms.*$/, "", name); sub(/^attention matmuls$/, "matmuls", name); sub(/^lm head$/, "head", name)
                        ms = parts[i]; sub(/^[^0-9]* /, "", ms); sub(/ ms.*$/, "", ms)
                        out = out " " name "=" ms
                    }
                }
                / barriers: / { bar = $3 }
                END { printf "%s round=%s load=%s t/s=%s barriers=%s%s\n", w, r, load, speed, bar, out }'
    done
done >"$ROUNDS_LOG"
cat "$ROUNDS_LOG"
awk '
    {
        w = $1
        for (i = 2; i <= NF; i++) {
            split($i, kv, "="); k = kv[1]; v = kv[2]
            if (k == "round" || k == "load") continue
            key = w SUBSEP k
            if (k == "t/s") { if (!(key in best) || v > best[key]) best[key] = v }
            else if (!(key in best) || v < best[key]) best[key] = v
            names[k] = 1
        }
    }
    END {
        printf "\n| op, best round | old | new | new/old |\n|---|---:|---:|---:|\n"
        split("t/s barriers matmuls attention router experts head other", order, " ")
        for (i = 1; i <= 8; i++) {
            k = order[i]
            if (!((("old" SUBSEP k) in best))) continue
            o = best["old" SUBSEP k]; nn = best["new" SUBSEP k]
            printf "| %s | %s | %s | %.2fx |\n", k, o, nn, (o > 0 ? nn / o : 0)
        }
        for (j = 0; j < 2; j++) {
            w = j ? "new" : "old"
            rest[w] = best[w SUBSEP "matmuls"] + best[w SUBSEP "attention"] + best[w SUBSEP "router"] + best[w SUBSEP "other"]
        }
        printf "| rest (matmuls+attention+router+other) | %.1f | %.1f | old/new %.2fx faster |\n", rest["old"], rest["new"], rest["old"] / rest["new"]
    }' "$ROUNDS_LOG"
