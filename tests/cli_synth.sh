#!/bin/sh
# moex synth and moex profile from the command line: a tiny model is made,
# described, run and profiled; the stats file has the documented size; bad
# options and values are errors (exit 2) with a message.
set -u
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_synth.$$
mkdir -p "$tmp"
check() { # description, expected status, command...
    what=$1; want=$2; shift 2
    "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL: $what: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
    else echo "ok: $what"; fi
}
model=$tmp/tiny.gguf
check "synth tiny" 0 "$MOEX_BIN" synth --preset tiny --layers 3 --experts 16 --top-k 4 --type q8_0 --seed 7 -o "$model"
grep -q "3 layers, dim 256, 16 experts top-4, q8_0" "$tmp/err" || { echo "FAIL: synth summary: $(cat "$tmp/err")"; fail=1; }
check "info" 0 "$MOEX_BIN" info "$model"
grep -q "expert_count *16" "$tmp/out" || { echo "FAIL: info shows no expert_count 16"; fail=1; }
grep -q "blk.2.ffn_down_exps.weight" "$tmp/out" || { echo "FAIL: info shows no layer 2"; fail=1; }
check "run" 0 "$MOEX_BIN" run -m "$model" -p "The morning was" -n 8
check "profile" 0 "$MOEX_BIN" profile -m "$model" --random-tokens 300 --seq 100 -o "$tmp/stats" -t 1
grep -q "^ *mean" "$tmp/out" || { echo "FAIL: profile printed no summary"; fail=1; }
grep -q "asks for a top-10% share" "$tmp/out" || { echo "FAIL: profile did not read the synth skew"; fail=1; }
# header 64 + the model name "moex-synth" + 8 * (3 L E + 4 L + L E E), L = 3, E = 16
size=$(wc -c < "$tmp/stats")
want=$((64 + 10 + 8 * (3 * 3 * 16 + 4 * 3 + 3 * 16 * 16)))
[ "$size" -eq "$want" ] || { echo "FAIL: stats file has $size bytes, wanted $want (name 'moex-synth')"; fail=1; }
printf 'The morning was cold and clear.\nShe made a cup of tea.\n\n' > "$tmp/prompts.txt"
check "profile -f" 0 "$MOEX_BIN" profile -m "$model" -f "$tmp/prompts.txt" -o "$tmp/stats2" -q
check "same seed, same bytes" 0 "$MOEX_BIN" synth --preset tiny --layers 3 --experts 16 --top-k 4 --type q8_0 --seed 7 -o "$tmp/again.gguf" -q
cmp -s "$model" "$tmp/again.gguf" || { echo "FAIL: same options gave different files"; fail=1; }
check "--arch qwen3moe is the default" 0 "$MOEX_BIN" synth --arch qwen3moe --preset tiny --layers 3 --experts 16 --top-k 4 \
    --type q8_0 --seed 7 -o "$tmp/arch.gguf" -q
cmp -s "$model" "$tmp/arch.gguf" || { echo "FAIL: --arch qwen3moe gave another file"; fail=1; }
check "synth bad --arch" 2 "$MOEX_BIN" synth --arch gpt9 -o "$tmp/x.gguf"
grep -q "\-\-arch: invalid value 'gpt9'" "$tmp/err" || { echo "FAIL: --arch message: $(cat "$tmp/err")"; fail=1; }

check "synth without -o" 2 "$MOEX_BIN" synth --preset tiny
check "synth bad preset" 2 "$MOEX_BIN" synth --preset huge -o "$tmp/x.gguf"
check "synth bad type" 2 "$MOEX_BIN" synth --preset tiny --type q3_k -o "$tmp/x.gguf"
check "synth bad skew" 2 "$MOEX_BIN" synth --preset tiny --skew -1 -o "$tmp/x.gguf"
check "synth bad locality" 2 "$MOEX_BIN" synth --preset tiny --locality 1.5 -o "$tmp/x.gguf"
check "synth bad layers" 2 "$MOEX_BIN" synth --preset tiny --layers 0 -o "$tmp/x.gguf"
check "synth top-k > experts" 2 "$MOEX_BIN" synth --preset tiny --top-k 9 -o "$tmp/x.gguf"
grep -q "top-k 9" "$tmp/err" || { echo "FAIL: top-k message: $(cat "$tmp/err")"; fail=1; }
[ ! -e "$tmp/x.gguf" ] || { echo "FAIL: a failed synth left a file"; fail=1; }
check "synth unknown option" 2 "$MOEX_BIN" synth --preset tiny --frobnicate -o "$tmp/x.gguf"
check "synth missing vocab file" 1 "$MOEX_BIN" synth --preset tiny --vocab-from "$tmp/none.gguf" -o "$tmp/x.gguf"
check "profile without -o" 2 "$MOEX_BIN" profile -m "$model" --random-tokens 10
check "profile with both inputs" 2 "$MOEX_BIN" profile -m "$model" --random-tokens 10 -f "$tmp/prompts.txt" -o "$tmp/s"
check "profile bad --random-tokens" 2 "$MOEX_BIN" profile -m "$model" --random-tokens many -o "$tmp/s"
check "profile missing file" 1 "$MOEX_BIN" profile -m "$model" -f "$tmp/none.txt" -o "$tmp/s"
rm -rf "$tmp"
exit $fail
