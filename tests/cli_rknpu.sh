#!/bin/sh
# The rknpu device on both fake kernel drivers gives the cpu device's logits
# byte for byte on the three architectures at 100% and 30% budgets; a pack
# file in the NPU's layout round-trips; without a board the device names the
# nodes it probed and the run goes on on the CPU; an injected submit failure
# still answers; probe and --dump-program decode what the generator emits.
set -u
. "$MOEX_SRC/tests/shell_lib.sh"
[ -d "$MOEX_ORACLE" ] || { echo "SKIP: oracle directory $MOEX_ORACLE not found"; exit 77; }
fail=0
cli_tmpdir rknpu
cli_clean_env
# has DESCRIPTION PATTERN FILE...: one of the files matches PATTERN (grep -e).
has() {
    what=$1 pat=$2; shift 2
    cat "$@" | grep -q -e "$pat" || { echo "FAIL: $what: no '$pat' in:"; cat "$@"; fail=1; }
}
ids_of() { tr -s ' \n' ',,' < "$1" | sed 's/^,//; s/,$//'; }
same_logits() { # what model ids budget
    for dev in cpu "rknpu --rknpu fake=rocket" "rknpu --rknpu fake=rknpu"; do
        # shellcheck disable=SC2086
        "$MOEX_BIN" eval -m "$2" --device $dev --hot-budget "$4" --min-m 1 -b 16 -t 1 --tokens "$3" \
            --logits "$tmp/l.$(echo "$dev" | tr ' =' '__')" 2> "$tmp/err" || { echo "FAIL: $1 $dev $4"; cat "$tmp/err"; fail=1; }
    done
    if cmp -s "$tmp/l.cpu" "$tmp/l.rknpu_--rknpu_fake_rocket" && cmp -s "$tmp/l.cpu" "$tmp/l.rknpu_--rknpu_fake_rknpu"; then
        echo "ok: $1 at $4: rknpu (rocket, rknpu) logits = cpu logits"
    else
        echo "FAIL: $1 at $4: rknpu logits differ from the cpu device's"; fail=1
    fi
}
o=$MOEX_ORACLE
for budget in 100% 30%; do
    same_logits qwen3moe "$o/models/qwen3moe-o1-Q4_K_M.gguf" "$(ids_of "$o/logits/ids-a.txt")" $budget
    same_logits lfm2moe "$o/lfm2moe-o2/models/lfm2moe-o2-Q4_K_M.gguf" "$(ids_of "$o/lfm2moe-o2/logits/ids-a.txt")" $budget
    same_logits qwen35moe "$o/qwen35moe-o3/models/qwen35moe-o3-Q4_K_M.gguf" "$(ids_of "$o/qwen35moe-o3/logits/ids-a.txt")" $budget
done

# a pack file in the NPU layout: written, then loaded by a later run with the same logits
model=$o/models/qwen3moe-o1-Q4_K_M.gguf
ids=$(ids_of "$o/logits/ids-a.txt")
expect "pack in the rknpu layout" 0 "$MOEX_BIN" pack -m "$model" --device rknpu --rknpu fake=rocket --all -o "$tmp/m.mxpk"
expect "eval from the pack file" 0 "$MOEX_BIN" eval -m "$model" --device rknpu --rknpu fake=rknpu --pack "$tmp/m.mxpk" \
    --hot-budget 100% --min-m 1 -b 16 -t 1 --tokens "$ids" --logits "$tmp/l.pack" --profile
has "the pack file filled the slots" "16 loaded from" "$tmp/err"
"$MOEX_BIN" eval -m "$model" --device rknpu --rknpu fake=rknpu --no-pack --hot-budget 100% --min-m 1 -b 16 -t 1 \
    --tokens "$ids" --logits "$tmp/l.live" 2> /dev/null
if cmp -s "$tmp/l.pack" "$tmp/l.live"; then echo "ok: packed and live logits are the same bytes"
else echo "FAIL: logits from the rknpu pack file differ from a live pack"; fail=1; fi
expect "the rknpu pack file refused by the cpu device" 0 "$MOEX_BIN" eval -m "$model" --device cpu --pack "$tmp/m.mxpk" \
    --hot-budget 100% --min-m 1 --tokens 1,2,3 --logits "$tmp/l.cpu2"
has "the cpu device names the layout" "packed for device rknpu (layout rknpu" "$tmp/err"

# no board here: the probed nodes are named and the CPU answers
expect "no NPU: the run goes on on the CPU" 0 "$MOEX_BIN" run -m "$model" --device rknpu -n 4 -p Hello
has "each probed node named" "/dev/accel/accel0: .*/dev/dri/card0: " "$tmp/err"
# an injected timeout: still an answer
expect "injected submit timeout" 0 "$MOEX_BIN" run -m "$model" --device rknpu --rknpu fake=rocket,fail_submit=1,fail=timeout \
    --min-m 1 -n 4 -p Hello --profile
has "the failure counted" "device failures: 0 allocations, [1-9]" "$tmp/err"
expect "a bad option" 2 "$MOEX_BIN" run -m "$model" --device rknpu --rknpu fake=tpu -n 1 -p Hi
has "the option named" "fake=tpu" "$tmp/err"

expect "--rknpu with another device" 0 "$MOEX_BIN" run -m "$model" --device cpu --rknpu fake=rocket -n 1 -p Hi
has "--rknpu noted as unused" "note: --rknpu changes nothing with --device cpu" "$tmp/err"

# probe and the decoded program
expect "probe on the fake" 0 "$MOEX_BIN" probe --device rknpu --rknpu fake=rknpu --shape 2048x768 --m 8 --no-pack-types
has "driver, version, windows" "rknpu 0.9.8), windows: 1 IOMMU domain x 4096 MiB" "$tmp/out"
expect "dump a program" 0 "$MOEX_BIN" probe --dump-program 64,2048,768
has "named fields" "CNA.DATA_SIZE0 = 0x00010040 (DATAIN_HEIGHT=64 DATAIN_WIDTH=1)" "$tmp/out"
has "two K-slices" "program 2 of 2" "$tmp/out"
exit $fail
