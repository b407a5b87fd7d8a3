#!/bin/sh
# moex pack and pack files from the command line: a file is written next to
# the model and picked up by itself (or named with --pack, or refused with
# --no-pack / MOEX_PACK=0); runs from it give the tokens of a live run; a
# damaged, truncated, foreign, older or other-device file is refused with a
# message that says why and how to rebuild, and the run still answers; the
# plan in the file is used without --stats; bad options are errors.
set -u
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_pack
cp "$MOEX_ORACLE/models/qwen3moe-o1-Q4_K_M.gguf" "$tmp/m.gguf"
model=$tmp/m.gguf
run() { "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6,7,8,9,10,11,12 -n 4 --temp 0 --print-ids -t 2 "$@"; }
same_ids() { # description: stdout equals the live run's
    cmp -s "$tmp/out" "$tmp/live" || { echo "FAIL: $1: tokens differ from the live run"; cat "$tmp/out"; fail=1; }
}
# Flips one byte of a file in place: path, offset.
flip() { printf '\377' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null; }

expect "pack --help" 0 "$MOEX_BIN" pack --help
grep -q "usage: moex pack" "$tmp/out" || { echo "FAIL: pack --help has no usage line"; fail=1; }
expect "pack without --device" 2 "$MOEX_BIN" pack -m "$model"
says "pack without --device" "--device is required"
expect "pack with an unknown option" 2 "$MOEX_BIN" pack -m "$model" --device cpu --frobnicate
expect "MOEX_PACK= is an error" 2 env MOEX_PACK= "$MOEX_BIN" run -m "$model" -n 1
expect "--pack without a value" 2 "$MOEX_BIN" run -m "$model" --pack
expect "a budget that pins nothing" 1 "$MOEX_BIN" pack -m "$model" --device cpu --hot-budget 25% -o "$tmp/none.mxpk"
says "a budget that pins nothing" "pins no expert"
[ ! -e "$tmp/none.mxpk" ] || { echo "FAIL: a refused pack left a file"; fail=1; }

expect "live run" 0 run --device cpu --min-m 1 --no-pack --profile
cp "$tmp/out" "$tmp/live"
says "live run" "0 loaded from a pack file, 16 packed live"
expect "pack" 0 "$MOEX_BIN" pack -m "$model" --device cpu -t 2
grep -q "^moex pack: 16 experts" "$tmp/out" || { echo "FAIL: pack summary"; cat "$tmp/out"; fail=1; }
[ -f "$tmp/m.mxpk" ] || { echo "FAIL: no m.mxpk next to the model"; fail=1; }
expect "MODEL.mxpk is picked up" 0 run --device cpu --min-m 1 --profile
says "MODEL.mxpk is picked up" "16 loaded from $tmp/m.mxpk, 0 packed live"
same_ids "MODEL.mxpk is picked up"
expect "--no-pack" 0 run --device cpu --min-m 1 --no-pack --profile
says "--no-pack" "16 packed live"
expect "MOEX_PACK=0" 0 env MOEX_PACK=0 "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6,7,8,9,10,11,12 -n 4 \
    --temp 0 --print-ids -t 2 --device cpu --min-m 1 --profile
says "MOEX_PACK=0" "16 packed live"
cp "$tmp/m.mxpk" "$tmp/copy.mxpk"
expect "--pack FILE" 0 run --device cpu --min-m 1 --pack "$tmp/copy.mxpk" --profile
says "--pack FILE" "16 loaded from $tmp/copy.mxpk"
same_ids "--pack FILE"
expect "MOEX_PACK=FILE" 0 env MOEX_PACK="$tmp/copy.mxpk" "$MOEX_BIN" run -m "$model" --tokens 1,2,3,4,5,6,7,8,9,10,11,12 \
    -n 4 --temp 0 --print-ids -t 2 --device cpu --min-m 1 --profile
says "MOEX_PACK=FILE" "16 loaded from $tmp/copy.mxpk"

# Refusals: each says why and how to rebuild, and the run answers as a live one.
refused() { # description, file, why
    expect "$1" 0 run --device cpu --min-m 1 --pack "$2"
    says "$1" "pack file refused"
    says "$1" "$3"
    says "$1" "Rebuild it with: moex pack -m $model --device cpu --hot-budget 100% -o $2"
    same_ids "$1"
}
cp "$tmp/m.mxpk" "$tmp/index.mxpk"; flip "$tmp/index.mxpk" 8300
refused "a damaged index" "$tmp/index.mxpk" "bad checksum in section index"
cp "$tmp/m.mxpk" "$tmp/data.mxpk"; flip "$tmp/data.mxpk" 70000
refused "damaged data" "$tmp/data.mxpk" "bad checksum in section data"
n=$(grep -c "bad checksum in section data" "$tmp/err")
[ "$n" -eq 1 ] || { echo "FAIL: damaged data: the refusal is printed $n times, not once"; cat "$tmp/err"; fail=1; }
head -c 100000 "$tmp/m.mxpk" > "$tmp/trunc.mxpk"
refused "a truncated file" "$tmp/trunc.mxpk" "truncated"
cp "$tmp/m.mxpk" "$tmp/old.mxpk"; printf '\000' | dd of="$tmp/old.mxpk" bs=1 seek=8 conv=notrunc 2>/dev/null
refused "an older version" "$tmp/old.mxpk" "pack file version 0; this moex reads version 3"
refused "not a pack file" "$model" "not a moex pack file"
expect "pack another model" 0 "$MOEX_BIN" pack -m "$MOEX_ORACLE/models/qwen3moe-o1-Q8_0.gguf" --device cpu \
    -o "$tmp/q8.mxpk" -q
refused "another model" "$tmp/q8.mxpk" "packed from another model"
expect "another device" 0 run --device sim --min-m 1 --pack "$tmp/m.mxpk"
says "another device" "packed for device cpu"
says "another device" "--device sim"

# The plan in the file: packed with statistics at 50%, used by a run without them.
expect "profile" 0 "$MOEX_BIN" profile -m "$model" --random-tokens 128 --seq 64 -o "$tmp/stats" -q -t 2
expect "pack with statistics" 0 "$MOEX_BIN" pack -m "$model" --device cpu --hot-budget 50% --stats "$tmp/stats" \
    -o "$tmp/plan.mxpk"
grep -q "^moex pack: 2 experts (2 pinned by the plan)" "$tmp/out" || { echo "FAIL: pack with stats"; cat "$tmp/out"; fail=1; }
# Statistics belong to the model they were gathered on: the same weights in
# another quantization (same shape, another file) are refused.
expect "statistics of another model" 1 "$MOEX_BIN" run -m "$MOEX_ORACLE/models/qwen3moe-o1-Q5_K_M.gguf" \
    --tokens 1,2,3 -n 1 --device cpu --hot-budget 50% --stats "$tmp/stats"
says "statistics of another model" "$tmp/stats: statistics gathered on another model"
expect "statistics of another model, moex pack" 1 "$MOEX_BIN" pack -m "$MOEX_ORACLE/models/qwen3moe-o1-Q5_K_M.gguf" \
    --device cpu --hot-budget 50% --stats "$tmp/stats" -o "$tmp/q5.mxpk"
says "statistics of another model, moex pack" "gathered on another model"
expect "the file's plan without --stats" 0 run --device cpu --min-m 1 --hot-budget 50% --pack "$tmp/plan.mxpk" --profile
says "the file's plan without --stats" "pinned experts: 2 filled"
says "the file's plan without --stats" "2 loaded from"
expect "another budget plans anew" 0 run --device cpu --min-m 1 --hot-budget 100% --pack "$tmp/plan.mxpk" --profile
says "another budget plans anew" "planned anew"
says "another budget plans anew" "2 loaded from $tmp/plan.mxpk, 14 packed live"
same_ids "another budget plans anew"
expect "pack --all" 0 "$MOEX_BIN" pack -m "$model" --device cpu --hot-budget 25% --all -o "$tmp/all.mxpk"
grep -q "^moex pack: 16 experts (0 pinned by the plan, all with --all)" "$tmp/out" || { echo "FAIL: --all"; cat "$tmp/out"; fail=1; }

# The CPU's interleaved layout only (--device none): runs without a device
# map it and give the tokens of a run that repacks; another model's file is
# not used, said once with the command that rebuilds it.
expect "live run without a device" 0 run --no-pack
cp "$tmp/out" "$tmp/live"
expect "pack the interleaved layout without the layout" 1 env MOEX_INTERLEAVE=0 "$MOEX_BIN" pack -m "$model" \
    --device none -o "$tmp/layout.mxpk"
says "pack the interleaved layout without the layout" "nothing to pack without a device"
"$MOEX_BIN" pack -m "$model" --device none -o "$tmp/layout.mxpk" > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "no matrix of the model has an interleaved kernel" "$tmp/err"; then
    echo "note: this machine has no interleaved kernel: the layout's file is not tested here"
else
    [ "$rc" -eq 0 ] && grep -q "^moex pack: the CPU's interleaved layout of 9 matrices" "$tmp/out" \
        && echo "ok: pack --device none" || { echo "FAIL: pack --device none: exit $rc"; cat "$tmp/out" "$tmp/err"; fail=1; }
    expect "the layout from the file" 0 run --pack "$tmp/layout.mxpk"
    same_ids "the layout from the file"
    ! grep -q "pack file" "$tmp/err" || { echo "FAIL: the layout from the file: said something"; cat "$tmp/err"; fail=1; }
    cp "$tmp/layout.mxpk" "$tmp/m.mxpk"
    expect "the layout next to the model" 0 run
    same_ids "the layout next to the model"
    expect "the layout for another model" 0 run --pack "$tmp/q8.mxpk"
    same_ids "the layout for another model"
    says "the layout for another model" "pack file not used for the CPU's interleaved layout, 9 matrices repacked"
    says "the layout for another model" "packed from another model"
    says "the layout for another model" "Rebuild it with: moex pack -m $model --device none -o $tmp/q8.mxpk"
    expect "a device run with the layout's file" 0 run --device cpu --min-m 1 --pack "$tmp/layout.mxpk"
    says "a device run with the layout's file" "holds no device experts"
fi
exit $fail
