#!/bin/sh
# Damaged inputs from the command line: a model that is empty, a directory,
# or cut at any of many offsets is an error (exit 1) that names the file,
# never a crash; a pack file that is cut short, empty, a directory, missing,
# or made for another model is refused with a message, and the run still
# answers with the tokens it gives without one. Tiny synth models.
set -u
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_damaged
cli_clean_env
no() { echo "FAIL: $*"; fail=1; }
"$MOEX_BIN" synth --preset tiny --type q4_k -o "$tmp/m.gguf" -q 2> "$tmp/err" || { no "synth"; cat "$tmp/err"; exit 1; }
"$MOEX_BIN" synth --preset tiny --type q4_k --seed 2 -o "$tmp/other.gguf" -q 2> "$tmp/err" || { no "synth"; exit 1; }
"$MOEX_BIN" synth --preset tiny --type q4_k --layers 3 -o "$tmp/deeper.gguf" -q 2> "$tmp/err" || { no "synth"; exit 1; }
run() { model=$1; shift; "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4 -n 3 --temp 0 --print-ids -t 1 --no-pin "$@"; }
size=$(wc -c < "$tmp/m.gguf")

# refused_model DESCRIPTION FILE [TEXT]: exit 1 and a message naming the file (and holding TEXT).
refused_model() {
    "$MOEX_BIN" run -m "$2" --tokens 1 -n 1 -t 1 --no-pin > /dev/null 2> "$tmp/err"
    rc=$?
    if [ "$rc" -ne 1 ] || ! grep -qF "$2" "$tmp/err" || ! grep -qF -- "${3:-$2}" "$tmp/err"; then
        no "$1: exit $rc: $(head -c 300 "$tmp/err")"
    fi
}
: > "$tmp/empty.gguf"
refused_model "an empty model" "$tmp/empty.gguf" "the file is empty (0 bytes), not a GGUF file"
mkdir -p "$tmp/dir.gguf"
refused_model "a directory as the model" "$tmp/dir.gguf" "a directory, not a GGUF model file (a Hugging Face"
printf 'not a model\n' > "$tmp/text.gguf"
refused_model "a text file as the model" "$tmp/text.gguf" "not a GGUF file (bad magic 6e 6f 74 20"
grep -q "convert_hf_to_gguf.py" "$tmp/err" || no "a text file as the model: no word on converting: $(cat "$tmp/err")"
n_cut=0
for n in 1 4 8 16 24 100 1000 5000 20000 100000 $((size / 2)) $((size - 4096)) $((size - 1)); do
    head -c "$n" "$tmp/m.gguf" > "$tmp/cut.gguf"
    refused_model "the model cut at byte $n" "$tmp/cut.gguf"
    "$MOEX_BIN" info "$tmp/cut.gguf" > /dev/null 2>&1
    [ $? -eq 1 ] || no "info of the model cut at byte $n"
    n_cut=$((n_cut + 1))
done
echo "ok: $n_cut cut models refused by run and info"

# Pack files: refused, and the run answers as without one.
run "$tmp/m.gguf" --device cpu --no-pack > "$tmp/want" 2> "$tmp/err" || { no "run without a pack file"; cat "$tmp/err"; }
[ -s "$tmp/want" ] || no "no tokens without a pack file"
"$MOEX_BIN" pack -m "$tmp/m.gguf" --device cpu -o "$tmp/p.mxpk" -q -t 1 2> "$tmp/err" || { no "pack"; cat "$tmp/err"; }
"$MOEX_BIN" pack -m "$tmp/other.gguf" --device cpu -o "$tmp/other.mxpk" -q -t 1 2> "$tmp/err" || { no "pack other"; cat "$tmp/err"; }
"$MOEX_BIN" pack -m "$tmp/deeper.gguf" --device cpu -o "$tmp/deeper.mxpk" -q -t 1 2> "$tmp/err" || { no "pack deeper"; cat "$tmp/err"; }
psize=$(wc -c < "$tmp/p.mxpk")
refused_model "a pack file as the model" "$tmp/p.mxpk" "a moex pack file, not a model: the model is the GGUF file"
# refused_pack DESCRIPTION FILE TEXT: the run warns with TEXT and gives the same tokens.
refused_pack() {
    run "$tmp/m.gguf" --device cpu --pack "$2" > "$tmp/got" 2> "$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then no "$1: exit $rc: $(head -c 300 "$tmp/err")"; return; fi
    grep -q "pack file refused" "$tmp/err" && grep -qF -- "$3" "$tmp/err" || no "$1: no refusal saying '$3': $(cat "$tmp/err")"
    cmp -s "$tmp/got" "$tmp/want" || no "$1: tokens '$(cat "$tmp/got")', without a pack file '$(cat "$tmp/want")'"
}
: > "$tmp/empty.mxpk"
refused_pack "an empty pack file" "$tmp/empty.mxpk" "not a moex pack file"
mkdir -p "$tmp/dir.mxpk"
refused_pack "a directory as the pack file" "$tmp/dir.mxpk" "not a regular file"
refused_pack "a missing pack file" "$tmp/none.mxpk" "cannot open"
refused_pack "another model's pack file" "$tmp/other.mxpk" "packed from another model file"
refused_pack "the pack file of a model of another shape" "$tmp/deeper.mxpk" \
    "packed from another model: 3 layers x 8 experts of 256 x 256, this model has 2 x 8 of 256 x 256"
grep -q "moex pack -m $tmp/m.gguf" "$tmp/err" || no "the refusal does not say how to rebuild: $(cat "$tmp/err")"
for n in 8 511 512 4096 $((psize / 2)) $((psize - 1)); do
    head -c "$n" "$tmp/p.mxpk" > "$tmp/cut.mxpk"
    refused_pack "the pack file cut at byte $n" "$tmp/cut.mxpk" "truncated"
done
run "$tmp/m.gguf" --device cpu --pack "$tmp/p.mxpk" > "$tmp/got" 2> "$tmp/err" && cmp -s "$tmp/got" "$tmp/want" ||
    no "the whole pack file: tokens '$(cat "$tmp/got")': $(cat "$tmp/err")"
[ $fail -eq 0 ] && echo "ok: damaged models are errors, damaged pack files are refused and the runs answer"
exit $fail
