#!/bin/sh
# What the commands say and read: the whole input, from files and pipes,
# and each message once, where it belongs (D6, D7, D10 and the rest of the
# command-line defects found by trying moex as a new user). Tiny synth model.
set -u
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_messages
cli_clean_env
"$MOEX_BIN" synth --preset tiny -o "$tmp/tiny.gguf" -q 2> "$tmp/err" || { echo "FAIL: synth tiny"; cat "$tmp/err"; exit 1; }
m=$tmp/tiny.gguf
no() { echo "FAIL: $*"; fail=1; }
yes() { echo "ok: $*"; }

# D6: an item of 32+ characters is a number like any other, not the end of the list.
"$MOEX_BIN" run -m "$m" --tokens 1,00000000000000000000000000000000000000002 -n 0 > /dev/null 2> "$tmp/err"
grep -q "prompt 2 tokens" "$tmp/err" && yes "--tokens with a long item" || { no "--tokens with a long item"; cat "$tmp/err"; }

# D7: -f - and -f /dev/stdin read a pipe; NUL bytes are part of the prompt, as tokenize reads them.
printf 'one two\000three four' > "$tmp/nul.txt"
want=$("$MOEX_BIN" tokenize -m "$m" -f "$tmp/nul.txt" | wc -w)
"$MOEX_BIN" run -m "$m" -f "$tmp/nul.txt" -n 0 > /dev/null 2> "$tmp/err"
grep -q "prompt $want tokens" "$tmp/err" && yes "run -f keeps the text after a NUL byte" || { no "run -f with a NUL byte (tokenize: $want tokens)"; cat "$tmp/err"; }
for f in - /dev/stdin; do
    printf 'Hello world' | "$MOEX_BIN" tokenize -m "$m" -f "$f" > "$tmp/a" 2> "$tmp/err"
    "$MOEX_BIN" tokenize -m "$m" -p 'Hello world' > "$tmp/b"
    [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" && yes "tokenize -f $f from a pipe" || { no "tokenize -f $f from a pipe"; cat "$tmp/err"; }
    printf 'Hello world' | "$MOEX_BIN" run -m "$m" -f "$f" -n 2 --temp 0 > "$tmp/out" 2> "$tmp/err"
    [ $? -eq 0 ] && grep -q "^Hello world" "$tmp/out" && yes "run -f $f from a pipe" || { no "run -f $f from a pipe"; cat "$tmp/err"; }
done
printf '1 2 3' | "$MOEX_BIN" eval -m "$m" --tokens-file - --logits "$tmp/l" 2> "$tmp/err" && [ "$(wc -c < "$tmp/l")" -eq $((3 * 512 * 4)) ] \
    && yes "eval --tokens-file - from a pipe" || { no "eval --tokens-file -"; cat "$tmp/err"; }
printf 'a line of text\nanother line\n' | "$MOEX_BIN" profile -m "$m" -f - -o "$tmp/s" -q 2> "$tmp/err" \
    && yes "profile -f - from a pipe" || { no "profile -f -"; cat "$tmp/err"; }

# run --print-ids: the generated ids, one line, nothing else.
"$MOEX_BIN" run -m "$m" -p "Hello" -n 4 --print-ids > "$tmp/out" 2> /dev/null
[ "$(wc -l < "$tmp/out")" -eq 1 ] && grep -Eq '^[0-9]+( [0-9]+){3}$' "$tmp/out" && yes "run --print-ids prints only ids" \
    || { no "run --print-ids printed:"; cat "$tmp/out"; }

# A rate needs tokens to divide: one generated token has none (was "0.0 t/s").
"$MOEX_BIN" run -m "$m" -p "Hello" -n 1 > /dev/null 2> "$tmp/err"
grep -q "generated 1 token$" "$tmp/err" && yes "no rate for one generated token" || { no "rate for one token:"; cat "$tmp/err"; }
"$MOEX_BIN" run -m "$m" -p "Hello" -n 0 > /dev/null 2> "$tmp/err"
grep -q "generated 0 tokens$" "$tmp/err" && ! grep -Eq '(^|[^0-9.])0\.0 t/s' "$tmp/err" && yes "no rate for no generated token" \
    || { no "rate for no token:"; cat "$tmp/err"; }

# chat: the reply's newline comes before the stats line on a shared pipe.
printf 'hi\nhow are you\n' | "$MOEX_BIN" chat -m "$m" -n 6 --temp 0 2>&1 | cat > "$tmp/out"
[ "$(grep -c '^moex: new prompt' "$tmp/out")" -eq 2 ] && yes "chat's stats lines start lines" || { no "chat output glued:"; cat "$tmp/out"; }

# chat /reset starts a new conversation: the same message then gives the
# first turn's prompt and reply (without it the prompt grows); a message
# with a NUL byte is said and skipped.
prompts() { sed -n 's/^moex: new prompt \([0-9]*\) tokens.*/\1/p' "$tmp/err" | tr '\n' ' '; }
printf 'hi\n/reset\nhi\n' | "$MOEX_BIN" chat -m "$m" -n 6 --temp 0 > "$tmp/out" 2> "$tmp/err"
set -- $(prompts)
[ $# -eq 2 ] && [ "$1" = "$2" ] && [ "$(sed -n 1p "$tmp/out")" = "$(sed -n 2p "$tmp/out")" ] \
    && yes "chat /reset: the first turn again (prompts of $1 and $2 tokens)" || { no "chat /reset:"; cat "$tmp/out" "$tmp/err"; }
printf 'hi\nhi\n' | "$MOEX_BIN" chat -m "$m" -n 6 --temp 0 > /dev/null 2> "$tmp/err"
set -- $(prompts)
[ $# -eq 2 ] && [ "$2" -gt "$1" ] && yes "chat without /reset: the conversation goes on ($1, then $2 tokens)" \
    || no "chat without /reset: prompts of $* tokens"
printf 'hi\000x\n' | "$MOEX_BIN" chat -m "$m" -n 2 --temp 0 > /dev/null 2> "$tmp/err"
grep -q "the message holds a NUL byte; it is ignored" "$tmp/err" && ! grep -q "new prompt" "$tmp/err" \
    && yes "chat: a message with a NUL byte is skipped" || { no "chat NUL:"; cat "$tmp/err"; }

# tokenize --pieces: id:'piece' per line, the pieces joined are the text.
"$MOEX_BIN" tokenize -m "$m" -p "Hi there" --pieces > "$tmp/out"
[ "$(sed "s/^[0-9]*:'\(.*\)'$/\1/" "$tmp/out" | tr -d '\n')" = "Hi there" ] && grep -Eq "^[0-9]+:'" "$tmp/out" \
    && yes "tokenize --pieces" || { no "tokenize --pieces:"; cat "$tmp/out"; }

# D10: a line longer than 65,535 bytes is one message (it was several turns).
awk 'BEGIN { for (i = 0; i < 14000; i++) printf "word "; printf "\n" }' > "$tmp/long.txt"
"$MOEX_BIN" chat -m "$m" -n 2 < "$tmp/long.txt" > /dev/null 2> "$tmp/err"
[ "$(grep -c 'exceeds the context' "$tmp/err")" -eq 1 ] && yes "chat: a 70 kB line is one message" || { no "chat long line:"; cat "$tmp/err"; }

# D10: a conversation that fills the context exactly still gets the one
# token the last position gives, and says the context is full.
printf 'hi\n' | "$MOEX_BIN" chat -m "$m" -n 1 --temp 0 > /dev/null 2> "$tmp/err"
n=$(sed -n -e 's/^moex: new prompt \([0-9]*\) tokens.*/\1/p' -e 's/^moex: \([0-9]*\) new prompt tokens.*/\1/p' "$tmp/err")
printf 'hi\n' | "$MOEX_BIN" chat -m "$m" -n 8 --temp 0 -c "$n" > /dev/null 2> "$tmp/err"
grep -q "context is full" "$tmp/err" && grep -q "generated 1 token" "$tmp/err" && yes "chat: a context filled exactly is said" \
    || { no "chat with a full context ($n tokens):"; cat "$tmp/err"; }

# A device that is not used is said at start, once.
for d in amx auto; do
    "$MOEX_BIN" run -m "$m" -p "Hello" -n 2 --device $d > /dev/null 2> "$tmp/err"
    if grep -q "note:" "$tmp/err"; then
        [ "$(grep -c 'note:' "$tmp/err")" -eq 1 ] && head -1 "$tmp/err" | grep -q "note:" && yes "--device $d without AMX: said first, once" \
            || { no "--device $d note not first or not once:"; cat "$tmp/err"; }
    else
        yes "--device $d: this CPU has AMX, nothing to say"
    fi
done

# Device options that change nothing are said, once, before the work.
"$MOEX_BIN" run -m "$m" -p "Hello" -n 1 --hot-budget 50% --stats "$tmp/none.stats" > /dev/null 2> "$tmp/err"
[ "$(grep -c 'hot-budget, --stats change nothing with --device none' "$tmp/err")" -eq 1 ] && head -1 "$tmp/err" | grep -q note: \
    && yes "device options without a device are said" || { no "device options without a device:"; cat "$tmp/err"; }
"$MOEX_BIN" run -m "$m" -p "Hello" -n 1 --device cpu --sim cores=2 > /dev/null 2> "$tmp/err"
grep -q -e '--sim changes nothing with --device cpu' "$tmp/err" && yes "--sim without the sim device is said" \
    || { no "--sim with --device cpu:"; cat "$tmp/err"; }

# A refused pack file is said once, at start, with its reason (it was said
# again at the end).
"$MOEX_BIN" pack -m "$m" --device cpu -o "$tmp/t.mxpk" -q 2> "$tmp/err" || { no "pack"; cat "$tmp/err"; }
printf 'X' | dd of="$tmp/t.mxpk" bs=1 seek=70000 conv=notrunc 2> /dev/null
"$MOEX_BIN" run -m "$m" --device cpu --min-m 1 --pack "$tmp/t.mxpk" --tokens 1,2,3 -n 2 > /dev/null 2> "$tmp/err"
[ "$(grep -c 'pack file refused' "$tmp/err")" -eq 1 ] && head -1 "$tmp/err" | grep -q "bad checksum" \
    && yes "a refused pack file is said once, at start" || { no "pack refusal:"; cat "$tmp/err"; }
# What the device's budget holds is said once at start, after the warnings.
[ "$(grep -c 'note: device cpu: the budget of .* holds the staging' "$tmp/err")" -eq 1 ] &&
    grep -q '16 of 16 experts (100%), 16 of them pinned; expected share of routed rows on it 100%' "$tmp/err" &&
    yes "what the budget holds is said once" || { no "budget summary:"; cat "$tmp/err"; }
"$MOEX_BIN" run -m "$m" --device sim --hot-budget 30% --tokens 1,2,3 -n 2 > /dev/null 2> "$tmp/err"
grep -q 'and 4 of 16 experts (25%), 0 of them pinned; expected share of routed rows on it 25% (as many as its slots' \
    "$tmp/err" && yes "a partial budget's summary" || { no "partial budget summary:"; cat "$tmp/err"; }

# -c above the trained context is said.
"$MOEX_BIN" run -m "$m" -p "Hello" -n 1 -c 5000 > /dev/null 2> "$tmp/err"
grep -q "ctx 5000 is above the 4096" "$tmp/err" && yes "-c above the trained context" || { no "-c 5000 said nothing:"; cat "$tmp/err"; }

# pack: its --help does not offer none as the default device.
"$MOEX_BIN" pack --help > "$tmp/out"
grep -A2 -e "--device D" "$tmp/out" | grep -q "required" && ! grep -A2 -e "--device D" "$tmp/out" | grep -q "default: none" \
    && yes "pack --help: --device is required" || { no "pack --help:"; grep -A2 -e "--device D" "$tmp/out"; }

# info without a file describes the default model.
mkdir -p "$MOEX_CACHE" && cp "$m" "$MOEX_CACHE/small.gguf"
"$MOEX_BIN" info > "$tmp/out" 2> "$tmp/err" && grep -q "qwen3moe" "$tmp/out" && yes "info without a file" || { no "info without a file"; cat "$tmp/err"; }

exit $fail
