#!/bin/sh
# Split invariance on moex synth's hybrid models (qwen35moe's delta net,
# lfm2moe's short convolution; the tiny presets as q4_k_m): `moex
# eval` of one 150-token prompt with -b 1, 7 and 64 writes the same logits,
# byte for byte, as the whole prompt in one pass. 64-token passes cross the
# delta net's 16-token chunks inside a pass and start inside one.
set -u
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_split
cli_clean_env
ids=$(seq 0 149 | awk '{ print ($1 * 37 + 11) % 500 }' | paste -sd, -)
[ "$(echo "$ids" | tr ',' '\n' | wc -l)" -eq 150 ] || { echo "FAIL: 150 ids: $ids"; exit 1; }
for model in "qwen35moe qwen35-tiny" "lfm2moe lfm2-tiny"; do
    set -- $model
    for type in q4_k_m; do
        m=$tmp/$2-$type.gguf
        expect "synth $2 $type" 0 "$MOEX_BIN" synth -q --arch "$1" --preset "$2" --type $type -o "$m" -t 2
        expect "$2 $type in one pass" 0 "$MOEX_BIN" eval -m "$m" --tokens "$ids" --logits "$tmp/whole" -t 2
        for b in 64 7 1; do
            expect "$2 $type in passes of $b" 0 "$MOEX_BIN" eval -m "$m" --tokens "$ids" --logits "$tmp/split" -b $b -t 2
            cmp -s "$tmp/whole" "$tmp/split" || { echo "FAIL: $2 $type: -b $b gives other logits than one pass"; fail=1; }
        done
    done
done
exit $fail
