#!/bin/sh
# The command line: every command has --help, bad options and values are
# errors (exit 2) with a message, eval writes [n_tokens][n_vocab] floats,
# tokenize prints the reference ids.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_commands.$$
mkdir -p "$tmp"
model=$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf
check() { # description, expected status, command...
    what=$1; want=$2; shift 2
    "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL: $what: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
    else echo "ok: $what"; fi
}
for c in run chat eval tokenize bench info synth profile serve; do
    check "$c --help" 0 "$MOEX_BIN" "$c" --help
    grep -q "usage: moex $c" "$tmp/out" || { echo "FAIL: $c --help has no usage line"; fail=1; }
done
check "no command" 2 "$MOEX_BIN"
check "unknown command" 2 "$MOEX_BIN" frobnicate
check "unknown option" 2 "$MOEX_BIN" run -m "$model" --frobnicate
check "bad --temp" 2 "$MOEX_BIN" run -m "$model" --temp warm
check "bad --threads" 2 "$MOEX_BIN" run -m "$model" -t 0
check "bad --tokens" 2 "$MOEX_BIN" eval -m "$model" --tokens 1,x,3 --logits "$tmp/l"
check "token out of range" 2 "$MOEX_BIN" run -m "$model" --tokens 1,99999 -n 1
grep -q "tokens" "$tmp/err" || { echo "FAIL: out-of-range message"; fail=1; }
check "missing model" 1 "$MOEX_BIN" run -m "$tmp/none.gguf" -n 1

check "eval" 0 "$MOEX_BIN" eval -m "$model" --tokens 1,2,3,4,5 --logits "$tmp/logits"
size=$(wc -c < "$tmp/logits")
[ "$size" -eq $((5 * 2048 * 4)) ] || { echo "FAIL: eval wrote $size bytes"; fail=1; }

check "tokenize" 0 "$MOEX_BIN" tokenize -m "$MOEX_ORACLE/tokenizer/qwen3-vocab.gguf" -p "Hello world"
[ "$(cat "$tmp/out")" = "9707 1879" ] || { echo "FAIL: tokenize gave '$(cat "$tmp/out")'"; fail=1; }
check "tokenize special" 0 "$MOEX_BIN" tokenize -m "$MOEX_ORACLE/tokenizer/qwen3-vocab.gguf" -p "<|im_start|>user"
[ "$(cat "$tmp/out")" = "151644 872" ] || { echo "FAIL: special gave '$(cat "$tmp/out")'"; fail=1; }
check "tokenize no special" 0 "$MOEX_BIN" tokenize -m "$MOEX_ORACLE/tokenizer/qwen3-vocab.gguf" -p "<|im_start|>" --no-parse-special
case " $(cat "$tmp/out") " in *" 151644 "*) echo "FAIL: --no-parse-special parsed it"; fail=1;; esac

check "run with sampling" 0 "$MOEX_BIN" run -m "$model" -p "Hello" -n 8 --temp 0.7 --top-k 20 --top-p 0.9 --min-p 0.05 --seed 3
grep -q "t/s" "$tmp/err" || { echo "FAIL: run printed no speed"; fail=1; }
"$MOEX_BIN" run -m "$model" -p "Hello" -n 8 --temp 0.7 --seed 3 --print-ids > "$tmp/a" 2>/dev/null
"$MOEX_BIN" run -m "$model" -p "Hello" -n 8 --temp 0.7 --seed 3 --print-ids > "$tmp/b" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: same seed, different tokens"; fail=1; }

check "bench" 0 "$MOEX_BIN" bench -m "$model" -p 16 -n 4 -r 2
grep -q "| pp16 |" "$tmp/out" && grep -q "| tg4 |" "$tmp/out" || { echo "FAIL: bench table"; cat "$tmp/out"; fail=1; }
# the roofline: bytes per token, the measured read bandwidth, a GB/s and RSS column on the tg row
grep -q "GB of weights per token" "$tmp/out" && grep -q "read bandwidth before the tests: [0-9.]* GB/s" "$tmp/out" &&
    grep -Eq "\| tg4 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9]+% \| [0-9.]+ GiB \|" "$tmp/out" ||
    { echo "FAIL: bench roofline"; cat "$tmp/out"; fail=1; }

printf 'hi\n/exit\n' | "$MOEX_BIN" chat -m "$model" -n 4 > "$tmp/out" 2> "$tmp/err" || { echo "FAIL: chat"; cat "$tmp/err"; fail=1; }
rm -rf "$tmp"
exit $fail
