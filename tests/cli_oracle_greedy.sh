#!/bin/sh
# Greedy continuations of the oracle F32 and F16 models (made by llama.cpp)
# must be reproduced exactly: moex run --tokens ... --temp 0 -n 32 --print-ids.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
ids=$(tr -s ' \n' ',' < "$MOEX_ORACLE/logits/ids-a.txt" | sed 's/^,//; s/,$//')
fail=0
for type in F32 F16; do
    got=$("$MOEX_BIN" run -m "$MOEX_ORACLE/models/qwen3moe-o1-$type.gguf" --tokens "$ids" \
          --temp 0 -n 32 --print-ids --ignore-eos -t 2 2>/dev/null)
    want=$(tr -s ' \n' ' ' < "$MOEX_ORACLE/logits/o1-$type.ids-a.greedy32.txt" | sed 's/ $//')
    if [ "$got" = "$want" ]; then
        echo "ok: $type greedy continuation matches"
    else
        echo "FAIL: $type greedy continuation"; echo "  want: $want"; echo "  got:  $got"; fail=1
    fi
done
exit $fail
