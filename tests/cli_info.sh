#!/bin/sh
# moex info on every GGUF of the oracle (models made by llama.cpp, and the
# tokenizer-only file); a damaged file is one clear error and a non-zero exit.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
tmp=${MOEX_TEST_TMP:-/tmp}/cli_info.$$
mkdir -p "$tmp"
for f in "$MOEX_ORACLE"/models/*.gguf "$MOEX_ORACLE"/tokenizer/*.gguf; do
    if ! "$MOEX_BIN" info "$f" > "$tmp/out" 2> "$tmp/err"; then
        echo "FAIL: moex info $f"; cat "$tmp/err"; fail=1; continue
    fi
    case "$f" in
        */models/*)
            grep -q 'qwen3moe' "$tmp/out" && grep -q 'blk.1.ffn_down_exps.weight' "$tmp/out" &&
                grep -q 'expert_count' "$tmp/out" || { echo "FAIL: $f: expected fields missing"; fail=1; } ;;
        *)
            grep -q 'tokenizer.ggml.tokens' "$tmp/out" || { echo "FAIL: $f: tokenizer keys missing"; fail=1; } ;;
    esac
    echo "ok: $(basename "$f") ($(wc -l < "$tmp/out") lines)"
done
# A truncated copy: an error naming the file, exit status non-zero, no crash.
head -c 100000 "$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf" > "$tmp/truncated.gguf"
"$MOEX_BIN" info "$tmp/truncated.gguf" > /dev/null 2> "$tmp/err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "truncated.gguf" "$tmp/err" || [ "$(wc -l < "$tmp/err")" -ne 1 ]; then
    echo "FAIL: truncated file: rc=$rc, stderr:"; cat "$tmp/err"; fail=1
else
    echo "ok: truncated file -> $(cat "$tmp/err")"
fi
# Not a GGUF at all.
"$MOEX_BIN" info "$0" > /dev/null 2>&1 && { echo "FAIL: a shell script was accepted"; fail=1; }
# Model commands fail the same way, never crash.
"$MOEX_BIN" run -m "$tmp/truncated.gguf" -n 1 > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "truncated.gguf" "$tmp/err" || { echo "FAIL: run on a truncated model: rc=$rc"; cat "$tmp/err"; fail=1; }
rm -rf "$tmp"
exit $fail
