#!/bin/sh
# Perplexity on the oracle models of the three architectures (F32, Q8_0,
# Q4_K_M): moex perplexity next to llama.cpp's llama-perplexity (when
# LLAMA_PERPLEXITY names one; it is never built here: build it beside the
# project, target llama-perplexity), the same text, -c and batch, and the
# ratio of the two PPLs; then, with `quality`, what each device path costs:
# PPL and KL divergence of --device cpu and sim at hot budgets 100% and 30%
# against the --device none run (docs/quality.md). Prints markdown tables.
#   sh bench/perplexity.sh [compare|quality] [moex] [ctx]
#   LLAMA_PERPLEXITY=.../build/bin/llama-perplexity sh bench/perplexity.sh compare
set -eu
WHAT=${1:-compare}
MOEX=${2:-build/moex}
CTX=${3:-128}
ORACLE=${MOEX_ORACLE:-../shared/oracle}
TEXT=${PPL_TEXT:-tests/data/ppl-text.txt}
THREADS=${THREADS:-2}
DIR=${MOEX_BENCH_DIR:-/tmp/moex-bench}/perplexity
mkdir -p "$DIR"

model_file() { # arch type
    case $1 in
    qwen3moe) echo "$ORACLE/models/qwen3moe-o1-$2.gguf" ;;
    lfm2moe) echo "$ORACLE/lfm2moe-o2/models/lfm2moe-o2-$2.gguf" ;;
    qwen35moe) echo "$ORACLE/qwen35moe-o3/models/qwen35moe-o3-$2.gguf" ;;
    esac
}
final_ppl() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' "$1" | tail -1; }

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "text: $TEXT, -c $CTX, -t $THREADS"
echo
if [ "$WHAT" = compare ]; then
    echo "| model | chunks moex | chunks llama.cpp | PPL moex | PPL llama.cpp | moex / llama.cpp |"
    echo "|---|---|---|---|---|---|"
    for arch in ${ARCHS:-qwen3moe lfm2moe qwen35moe}; do
        for type in F32 Q8_0 Q4_K_M; do
            m=$(model_file $arch $type)
            "$MOEX" perplexity -m "$m" -f "$TEXT" -c "$CTX" -t "$THREADS" > "$DIR/moex.out" 2> "$DIR/moex.err"
            set -- $(final_ppl "$DIR/moex.out")
            ours=$1 ours_err=$2
            ours_chunks=$(sed -n 's/.*perplexity over \([0-9]*\) chunks.*/\1/p' "$DIR/moex.err")
            theirs=- theirs_chunks=- ratio=-
            if [ -n "${LLAMA_PERPLEXITY:-}" ]; then
                # llama.cpp's log thread can lose its last lines at exit (seen here with
                # stdin from /dev/null): run it again until the final line is there.
                for try in 1 2 3 4 5; do
                    "$LLAMA_PERPLEXITY" -m "$m" -f "$TEXT" -c "$CTX" -b "$CTX" -t "$THREADS" > "$DIR/llama.out" 2>&1
                    ! grep -q "Final estimate" "$DIR/llama.out" || break
                done
                set -- $(final_ppl "$DIR/llama.out")
                theirs=$1
                theirs_chunks=$(sed -n 's/.*calculating perplexity over \([0-9]*\) chunks.*/\1/p' "$DIR/llama.out")
                ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.5f", a / b }')
            fi
            echo "| $arch $type | $ours_chunks | $theirs_chunks | $ours +/- $ours_err | $theirs | $ratio |"
        done
    done
    exit 0
fi

# quality: each device path against --device none, per file.
echo "| model | path | PPL | PPL / PPL(none) | mean KL | 99% KL | max KL | same top p |"
echo "|---|---|---|---|---|---|---|---|"
for arch in ${ARCHS:-qwen3moe lfm2moe qwen35moe}; do
    for type in F32 Q8_0 Q4_K_M; do
        m=$(model_file $arch $type)
        base=$DIR/$arch-$type.kl
        "$MOEX" perplexity -m "$m" -f "$TEXT" -c "$CTX" -t "$THREADS" --device none --kl-divergence-base "$base" \
            --kl-top 2048 > "$DIR/base.out" 2> "$DIR/base.err"
        set -- $(final_ppl "$DIR/base.out")
        echo "| $arch $type | none (base) | $1 | 1 | 0 | 0 | 0 | 100% |"
        for path in "cpu 100%" "sim 100%" "sim 30%"; do
            set -- $path
            "$MOEX" perplexity -m "$m" -t "$THREADS" --device "$1" --hot-budget "$2" --no-pack \
                --kl-divergence-base "$base" --kl-divergence > "$DIR/kl.out" 2> "$DIR/kl.err"
            get() { sed -n "s/^$1 *: *\([-0-9.]*\).*/\1/p" "$DIR/kl.out" | head -1; }
            echo "| $arch $type | $1 $2 | $(get 'Mean PPL(Q)') | $(get 'Mean PPL(Q)\/PPL(base)') |" \
                "$(get 'Mean    KLD') | $(get '99.0%   KLD') | $(get 'Maximum KLD') | $(get 'Same top p')% |"
        done
    done
done
