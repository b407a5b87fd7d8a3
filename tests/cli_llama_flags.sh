#!/bin/sh
# The flags a llama.cpp user types: each is taken, does what llama.cpp's
# does, and the old spellings that do not collide still work (-s is the
# seed now, the system prompt is -sys / --system-prompt / --system). On a
# tiny synthetic model made here.
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_llama_flags
cli_clean_env
fail=0
M=$tmp/tiny.gguf
"$MOEX_BIN" synth -o "$M" --preset tiny --ctx 1000 > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
run() { "$MOEX_BIN" run -m "$M" -t 1 --no-pin "$@"; }
same() { # description, file a, file b
    cmp -s "$2" "$3" && echo "ok: $1" || { echo "FAIL: $1:"; cat "$2" "$3"; fail=1; }
}
differ() {
    cmp -s "$2" "$3" && { echo "FAIL: $1: both"; cat "$2"; fail=1; } || echo "ok: $1"
}
ids_count() { wc -w < "$tmp/out" | tr -d ' '; }

# Long forms: --model --threads --prompt --n-predict --ctx-size --batch-size.
expect "long forms" 0 "$MOEX_BIN" run --model "$M" --threads 1 --prompt "Hello" --n-predict 3 --ctx-size 100 \
    --batch-size 7 --temp 0 --print-ids --ignore-eos --profile
[ "$(ids_count)" = 3 ] || { echo "FAIL: --n-predict 3 gave $(ids_count) tokens"; fail=1; }
says "--ctx-size sets the context" "context of 100 tokens"
cp "$tmp/out" "$tmp/long"
expect "short forms" 0 "$MOEX_BIN" run -m "$M" -t 1 -p "Hello" -n 3 -c 100 -b 7 --temp 0 --print-ids --ignore-eos
same "short and long forms give the same tokens" "$tmp/out" "$tmp/long"
expect "--ctx and --batch still taken" 0 run -p "Hello" -n 3 --ctx 100 --batch 7 --temp 0 --print-ids --ignore-eos
same "--ctx/--batch equal --ctx-size/--batch-size" "$tmp/out" "$tmp/long"
# --batch-size: a prompt of n tokens takes ceil(n / b) passes (the profile's
# attention calls, one per pass and layer; the tiny model has 2 layers).
P="Hello world, this is a longer prompt of text"
n=$("$MOEX_BIN" tokenize -m "$M" -p "$P" --count)
for b in 4 512; do
    expect "--batch-size $b" 0 run -p "$P" -n 1 --temp 0 --batch-size $b --profile
    calls=$(awk -F'|' '$2 ~ /attn q/ && $3 ~ /prefill/ { gsub(/ /, "", $9); print $9 }' "$tmp/err")
    [ "$calls" = $(((n + b - 1) / b * 2)) ] && echo "ok: --batch-size $b: $calls attention calls for $n tokens" ||
        { echo "FAIL: --batch-size $b: '$calls' attention calls for $n tokens"; fail=1; }
done
expect "--batch-size 0 refused" 2 run -p "Hello" --batch-size 0
says "--batch-size 0 named" "--batch"
expect "--threads 0 refused" 2 run -p "Hello" --threads 0

# --file: the same prompt as --prompt.
printf 'Hello' > "$tmp/prompt.txt"
expect "--file" 0 run --file "$tmp/prompt.txt" -n 3 --temp 0 --print-ids --ignore-eos
same "--file gives --prompt's tokens" "$tmp/out" "$tmp/long"
expect "-p and -f together refused" 2 run -p "Hello" -f "$tmp/prompt.txt"

# -n -1: until an end of generation or a full context.
expect "-n -1" 0 run -p "Hello" -n -1 -c 24 --temp 0 --print-ids --ignore-eos
says "-n -1 stops at a full context" "context is full (24 tokens)"
n_prompt=$("$MOEX_BIN" tokenize -m "$M" -p "Hello" --count)
[ "$(ids_count)" = $((24 - n_prompt + 1)) ] || { echo "FAIL: -n -1 gave $(ids_count) tokens in 24 - $n_prompt"; fail=1; }
expect "-n -2 refused" 2 run -p "Hello" -n -2
says "-n -2 explains -1" "-1 generates until"

# Seeds: none or -1 is a random one, printed; that seed typed again gives the
# same tokens; -s is --seed.
sample() { run -p "Hello" -n 8 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --print-ids --ignore-eos "$@"; }
expect "no seed" 0 sample
seed=$(sed -n 's/^moex: seed \([0-9]*\)$/\1/p' "$tmp/err")
[ -n "$seed" ] && echo "ok: an unset seed is printed ($seed)" || { echo "FAIL: no seed printed"; cat "$tmp/err"; fail=1; }
cp "$tmp/out" "$tmp/unseeded"
expect "--seed N again" 0 sample --seed "$seed"
same "the printed seed reproduces the run" "$tmp/out" "$tmp/unseeded"
grep -q "^moex: seed" "$tmp/err" && { echo "FAIL: a given seed is printed as if random"; fail=1; }
expect "-s N" 0 sample -s "$seed"
same "-s is --seed" "$tmp/out" "$tmp/unseeded"
expect "--seed -1" 0 sample --seed -1
seed2=$(sed -n 's/^moex: seed \([0-9]*\)$/\1/p' "$tmp/err")
[ -n "$seed2" ] && [ "$seed2" != "$seed" ] && echo "ok: --seed -1 picks another random seed" ||
    { echo "FAIL: --seed -1 gave seed '$seed2' after '$seed'"; fail=1; }
for s in 1 2 3; do sample --seed $s > "$tmp/s$s" 2> /dev/null; done
if cmp -s "$tmp/s1" "$tmp/s2" && cmp -s "$tmp/s2" "$tmp/s3"; then echo "FAIL: three seeds, one text"; fail=1
else echo "ok: seeds change sampled text"; fi
expect "--seed -2 refused" 2 run -p "Hello" --seed -2

# Sampling flags mean what llama.cpp's do: each of these leaves only the most
# likely token, so it gives --temp 0's tokens whatever the seed.
run -p "Hello" -n 8 --temp 0 --print-ids --ignore-eos > "$tmp/greedy" 2> "$tmp/err"
grep -q "^moex: seed" "$tmp/err" && { echo "FAIL: greedy decoding prints a seed"; fail=1; }
for f in "--top-k 1" "--min-p 1" "--top-p 0"; do
    # shellcheck disable=SC2086
    run -p "Hello" -n 8 --temp 1.5 $f --seed 7 --print-ids --ignore-eos > "$tmp/out" 2> /dev/null
    same "$f keeps only the most likely token" "$tmp/out" "$tmp/greedy"
done
# (greedy text of this model repeats tokens within 30)
run -p "Hello" -n 30 --temp 0 --print-ids --ignore-eos > "$tmp/greedy30" 2> /dev/null
expect "--repeat-penalty" 0 run -p "Hello" -n 30 --temp 0 --repeat-penalty 1.8 --print-ids --ignore-eos
differ "--repeat-penalty 1.8 changes greedy text" "$tmp/out" "$tmp/greedy30"
expect "--repeat-penalty 0 refused" 2 run -p "Hello" --repeat-penalty 0
expect "--temp -1 refused" 2 run -p "Hello" --temp -1

# -e/--escape (default) and --no-escape.
expect "escapes" 0 run -p 'a\tb\x41\\' -n 0 --temp 0
printf 'a\tbA\\\n' > "$tmp/want"
same "-p escapes processed by default" "$tmp/out" "$tmp/want"
expect "-e" 0 run -e -p 'a\tb\x41\\' -n 0 --temp 0
same "-e processes escapes" "$tmp/out" "$tmp/want"
expect "--no-escape" 0 run --no-escape -p 'a\tb' -n 0 --temp 0
printf 'a\\tb\n' > "$tmp/want"
same "--no-escape takes -p as typed" "$tmp/out" "$tmp/want"

# --no-warmup: taken by the commands that run a model.
expect "run --no-warmup" 0 run -p "Hello" -n 1 --no-warmup
expect "bench --no-warmup" 0 "$MOEX_BIN" bench -m "$M" -p 8 -n 2 -r 1 --no-roofline --no-warmup -t 1

# chat: -sys / --system-prompt / --system are the system prompt; -s is the seed.
chat_tokens() { # prompt tokens the first turn evaluated
    sed -n 's/^moex: new prompt \([0-9]*\) tokens.*/\1/p' "$tmp/err" | head -1
}
chat() { printf 'hi\n' | "$MOEX_BIN" chat -m "$M" -t 1 -n 2 --temp 0 "$@"; }
expect "chat without a system prompt" 0 chat
bare=$(chat_tokens)
for f in -sys --system-prompt --system; do
    expect "chat $f" 0 chat $f "You are terse."
    [ "$(chat_tokens)" -gt "$bare" ] && echo "ok: $f adds the system prompt" ||
        { echo "FAIL: $f: $(chat_tokens) prompt tokens, $bare without"; fail=1; }
    eval "sys_$(echo $f | tr -d -)=$(chat_tokens)"
done
[ "$sys_sys" = "$sys_systemprompt" ] && [ "$sys_sys" = "$sys_system" ] && echo "ok: the three spellings agree" ||
    { echo "FAIL: system prompt tokens $sys_sys / $sys_systemprompt / $sys_system"; fail=1; }
expect "chat -s 42" 0 chat -s 42
[ "$(chat_tokens)" = "$bare" ] && echo "ok: chat -s is the seed, not a system prompt" ||
    { echo "FAIL: chat -s 42 evaluated $(chat_tokens) tokens, $bare without a system prompt"; fail=1; }
expect "chat -sys escapes" 0 chat -sys 'a\nb'
esc=$(chat_tokens)
expect "chat -sys --no-escape" 0 chat -sys 'a\nb' --no-escape
[ "$(chat_tokens)" != "$esc" ] && echo "ok: chat --no-escape keeps the system prompt's backslashes" ||
    { echo "FAIL: chat --no-escape changes nothing"; fail=1; }

# chat /load refuses what /save did not write, and the chat goes on.
printf 'not a conversation\n' > "$tmp/notconv.txt"
printf 'moex chat 1\nuser hi\nwizard hello\n' > "$tmp/badrole.txt"
printf '/load %s\n/load %s\n/load %s\nhi\n' "$tmp/none.txt" "$tmp/notconv.txt" "$tmp/badrole.txt" |
    "$MOEX_BIN" chat -m "$M" -t 1 -n 2 --temp 0 > "$tmp/out" 2> "$tmp/err"
says "/load of a missing file" "/load $tmp/none.txt: cannot open"
says "/load of another file" "not a conversation saved by moex chat"
says "/load with an unknown role" "line 3: expected 'ROLE TEXT'"
says "the chat goes on after a refused /load" "new prompt"

# moex info -m FILE describes FILE, as info FILE does.
"$MOEX_BIN" info "$M" > "$tmp/info" 2>&1
expect "info -m" 0 "$MOEX_BIN" info -m "$M"
same "info -m FILE is info FILE" "$tmp/out" "$tmp/info"
expect "info --model" 0 "$MOEX_BIN" info --model "$M"
same "info --model FILE is info FILE" "$tmp/out" "$tmp/info"
expect "info -m without a file" 2 "$MOEX_BIN" info -m

# tokenize: --count, --detokenize, escaped pieces.
expect "tokenize --count" 0 "$MOEX_BIN" tokenize -m "$M" -p "Hello world" --count
[ "$(cat "$tmp/out")" = "$("$MOEX_BIN" tokenize -m "$M" -p "Hello world" | wc -w | tr -d ' ')" ] &&
    echo "ok: --count counts the ids" || { echo "FAIL: --count is not the number of ids"; fail=1; }
printf 'Hello, world.\nIt'"'"'s a test\tof text.' > "$tmp/text"
"$MOEX_BIN" tokenize -m "$M" -f "$tmp/text" > "$tmp/ids"
expect "tokenize --detokenize" 0 "$MOEX_BIN" tokenize -m "$M" --detokenize -f "$tmp/ids"
printf '\n' >> "$tmp/text"
same "--detokenize gives the text back" "$tmp/out" "$tmp/text"
expect "--detokenize with a bad id" 2 "$MOEX_BIN" tokenize -m "$M" --detokenize -p "1 99999"
expect "tokenize --pieces" 0 "$MOEX_BIN" tokenize -m "$M" -p "a'b
c" --pieces
grep -qF "'\\n'" "$tmp/out" && grep -qF "'\\''" "$tmp/out" && echo "ok: pieces printed escaped" ||
    { echo "FAIL: pieces not escaped:"; cat "$tmp/out"; fail=1; }
[ "$(wc -l < "$tmp/out")" = "$("$MOEX_BIN" tokenize -m "$M" -p "a'b
c" --count)" ] || { echo "FAIL: a newline piece broke a line"; fail=1; }

# eval: -p text is the tokens' logits; --logits - writes them to stdout.
ids=$("$MOEX_BIN" tokenize -m "$M" -p "Hello world" | tr ' ' ',')
"$MOEX_BIN" eval -m "$M" -t 1 --tokens "$ids" --logits "$tmp/by_ids" 2> /dev/null || fail=1
expect "eval -p" 0 "$MOEX_BIN" eval -m "$M" -t 1 -p "Hello world" --logits -
same "eval -p TEXT equals its ids, --logits - on stdout" "$tmp/out" "$tmp/by_ids"
printf 'Hello world' > "$tmp/hw"
expect "eval -f" 0 "$MOEX_BIN" eval -m "$M" -t 1 -f "$tmp/hw" --logits "$tmp/by_file"
same "eval -f FILE equals its ids" "$tmp/by_file" "$tmp/by_ids"
[ ! -e ./- ] || { echo "FAIL: --logits - made a file named -"; fail=1; }
expect "eval -p and --tokens together" 2 "$MOEX_BIN" eval -m "$M" -p "a" --tokens 1 --logits -
exit $fail
