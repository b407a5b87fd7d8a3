#!/usr/bin/env bash
# Two builds' bench_r16 side by side: the r16 kernels of an older build
# against this one's, with the plain rows' kernels (the same code in both)
# as the common reference. The two binaries run in turn, ROUNDS times, and
# each cell is the best of the rounds (each run is itself best of 10), so
# a shared machine's quiet moments count for both. A kernel only the new
# build has shows "-" as its old figure.
#
#   bash bench/r16_compare.sh OLD/bench_r16 NEW/bench_r16 [MiB=64] [ISA...]
#   ROUNDS=3 (default) ISA: bench_r16's kernel set names (default: avx2 avxvnni)
set -euo pipefail

old=${1:?usage: r16_compare.sh OLD/bench_r16 NEW/bench_r16 [MiB] [isa...]}
new=${2:?usage: r16_compare.sh OLD/bench_r16 NEW/bench_r16 [MiB] [isa...]}
mib=${3:-64}
shift $(($# < 3 ? $# : 3))
isas=${*:-avx2 avxvnni}
rounds=${ROUNDS:-3}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "r16_compare.sh: $b is not an executable" >&2; exit 2; }; done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq 1 "$rounds"); do
    for isa in $isas; do
        for side in old new; do
            bin=$old; [ $side = new ] && bin=$new
            "$bin" "$mib" "$isa" | sed -n "s/^| \(Q[0-9]_K\) | \([^|]*\) | \([^|]*\) | \([0-9.]*\) | \([0-9.]*\) |.*/$side|\1|\2|\3|\4|\5/p" >>"$log"
        done
    done
done

head -1 < <("$new" "$mib" none 2>/dev/null) || true
echo "bench_r16 $mib, $rounds rounds alternating the two builds, best of each; $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| type | kernels | test | plain rows | old r16 | new r16 | new / old | new / plain |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
awk -F'|' '
    { k = $2 "|" $3 "|" $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
      if ($5 > plain[k]) plain[k] = $5
      if ($1 == "old" && $6 > o[k]) o[k] = $6
      if ($1 == "new" && $6 > nw[k]) nw[k] = $6 }
    END { for (i = 1; i <= n; i++) { k = order[i]; split(k, f, "|")
        ov = o[k] > 0 ? sprintf("%.1f", o[k]) : "-"; ratio = o[k] > 0 ? sprintf("%.2fx", nw[k] / o[k]) : "-"
        printf "| %s | %s | %s | %.1f | %s | %.1f | %s | %.2fx |\n", f[1], f[2], f[3], plain[k], ov, nw[k], ratio,
               (plain[k] > 0 ? nw[k] / plain[k] : 0) } }' "$log"
