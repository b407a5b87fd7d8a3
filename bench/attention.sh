#!/bin/sh
# Two moex builds side by side on long prompts: for each thread count and
# round, each binary in turn runs `moex bench -p 512,2048 -n N --ops`; one
# line per (binary, threads, test, round) with t/s and the attention share
# --ops reports, so that an old and a new attention kernel compare under the
# same load. The machine's load average is printed with every round.
#   sh bench/attention.sh OLD_MOEX NEW_MOEX MODEL [threads list] [rounds] [tg tokens]
# e.g. sh bench/attention.sh /tmp/old/moex build/moex q30b-l8-q4km.gguf "1 2" 2 16
set -eu
OLD=$1
NEW=$2
MODEL=$3
THREADS=${4:-1 2}
ROUNDS=${5:-2}
NGEN=${6:-0}
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) logical CPUs"
echo "| binary | threads | round | test | t/s | attention ms per run | share | load avg |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
for t in $THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
        for which in old new; do
            bin=$OLD
            [ "$which" = new ] && bin=$NEW
            load=$(cut -d' ' -f1 /proc/loadavg)
            "$bin" bench -m "$MODEL" -p 512,2048 -n "$NGEN" -r 1 -t "$t" --ops --no-roofline 2>&1 |
                awk -v w="$which" -v t="$t" -v r="$r" -v load="$load" '
                    /^\| .* \| (pp|tg)[0-9]+ \|/ { split($0, c, "|"); test = c[7]; speed[test] = c[8] }
                    / per run: / {
                        test = $1; att = ""; share = ""
                        if (match($0, /attention [0-9.]+ ms \([0-9]+%\)/)) {
                            s = substr($0, RSTART, RLENGTH); split(s, f, " ")
                            att = f[2]; share = f[4]; gsub(/[()]/, "", share)
                        }
                        split(speed[" " test " "], v, " ")
                        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", w, t, r, test, v[1], att, share, load
                    }'
        done
    done
done
