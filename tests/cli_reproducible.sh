#!/bin/sh
# D5: the same command on the same files gives byte-identical logits at any
# hot budget, on the cpu and sim devices: admission weighs fixed cost
# figures, never the times measured in the run.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_reproducible.$$
mkdir -p "$tmp"
model=$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf
ids=$(tr -s ' \n' ',,' < "$MOEX_ORACLE/logits/ids-a.txt" | sed 's/^,//; s/,$//')
for device in cpu sim; do
    for budget in 25% 50% 75%; do
        for overlap in --no-overlap ""; do
            for i in 1 2 3; do
                # shellcheck disable=SC2086
                "$MOEX_BIN" eval -m "$model" --device "$device" --hot-budget "$budget" --min-m 1 -b 16 -t 1 $overlap \
                    --tokens "$ids" --logits "$tmp/l$i.bin" 2> "$tmp/err" \
                    || { echo "FAIL: $device $budget $overlap run $i"; cat "$tmp/err"; fail=1; }
            done
            if cmp -s "$tmp/l1.bin" "$tmp/l2.bin" && cmp -s "$tmp/l1.bin" "$tmp/l3.bin"; then
                echo "ok: $device $budget $overlap: three runs, one result"
            else
                echo "FAIL: $device $budget $overlap: logits differ between runs"; fail=1
            fi
        done
    done
done
rm -rf "$tmp"
exit $fail
