#!/bin/sh
# Every command fed missing, malformed, out-of-range and conflicting values
# and bad MOEX_* variables: exit status 2 and a message that names the option
# (or variable) and the value. Files that cannot be read are exit 1 with the
# path and the errno text. Every refusal here comes before any real work, on
# the tiny synth model, so the suite takes seconds.
set -u
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_robust
cli_clean_env
"$MOEX_BIN" synth --preset tiny -o "$tmp/tiny.gguf" -q 2> "$tmp/err" || { echo "FAIL: synth tiny"; cat "$tmp/err"; exit 1; }
m=$tmp/tiny.gguf

# bad DESCRIPTION STATUS TEXT... -- COMMAND...: the exit status, and every TEXT
# in the message, which is at most 3 lines (shell patterns, not a grep per
# check: there are about 600).
nl='
'
bad() {
    what=$1 want=$2
    shift 2
    n=0
    while [ "$1" != "--" ]; do n=$((n + 1)); eval "text_$n=\$1"; shift; done
    shift
    err=$("$@" 2>&1 > "$tmp/out" < /dev/null)
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: $what: exit $rc, wanted $want"; echo "$err" | sed 's/^/    /' | head -5; fail=1; return
    fi
    i=1
    while [ $i -le $n ]; do
        eval "t=\$text_$i"
        case $err in *"$t"*) ;; *)
            echo "FAIL: $what: the message does not name '$t':"; echo "$err" | sed 's/^/    /' | head -5; fail=1; return ;;
        esac
        i=$((i + 1))
    done
    case $err in *"$nl"*"$nl"*"$nl"*) echo "FAIL: $what: more than a short message:"; echo "$err"; fail=1; return ;; esac
    echo "ok: $what"
}
# ok DESCRIPTION COMMAND...: exit status 0.
ok() {
    what=$1
    shift
    "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null || { echo "FAIL: $what: exit $?"; cat "$tmp/err"; fail=1; return; }
    echo "ok: $what"
}
long_item=00000000000000000000000000000000000000001 # 41 characters: once the end of a list, silently

# serve, where it was built with HTTP support (its bad values are refused
# before it listens).
serve=
"$MOEX_BIN" serve --help | grep -q "without HTTP support" || serve=serve

# Every option that takes a value, as each command's --help lists it (on the
# lines that begin with an option): without the value, and with an empty one.
for c in run chat eval tokenize bench info synth profile probe pack $serve; do
    opts=$("$MOEX_BIN" $c --help | grep -E '^ +-' | grep -oE -- '--[a-z][a-z0-9-]* [A-Z]' | sed 's/ .$//' | sort -u)
    [ "$c" = info ] || [ -n "$opts" ] || { echo "FAIL: $c --help lists no option with a value"; fail=1; }
    for o in $opts; do
        bad "$c $o without a value" 2 "$o" -- "$MOEX_BIN" $c $o
        bad "$c $o ''" 2 "$o" "''" -- "$MOEX_BIN" $c $o ""
    done
done

# Options shared by every command that runs a model, through each of them.
for c in run chat eval bench profile pack $serve; do
    # what each command needs besides, so that only the value tested is wrong
    case $c in eval) set -- --tokens 1 --logits "$tmp/l" ;; profile) set -- -o "$tmp/s" ;; *) set -- ;; esac
    bad "$c: -m without a value" 2 "-m" -- "$MOEX_BIN" $c -m
    bad "$c: empty -m" 2 "-m" "''" -- "$MOEX_BIN" $c -m ""
    bad "$c: -t 0" 2 "--threads" "'0'" -- "$MOEX_BIN" $c "$@" -m "$m" -t 0
    bad "$c: -t many" 2 "--threads" "'many'" -- "$MOEX_BIN" $c "$@" -m "$m" -t many
    if [ "$c" = pack ]; then # no context, no run: their options are not pack's
        for o in -c -b --kv-type --min-m --no-overlap --adaptive-placement --pack --no-pack --profile --trace; do
            bad "pack: $o is not one of its options" 2 "unknown option '$o'" -- "$MOEX_BIN" pack -m "$m" --device cpu $o 1
        done
    fi
    if [ "$c" != pack ]; then
        bad "$c: -c 1k" 2 "--ctx" "'1k'" -- "$MOEX_BIN" $c "$@" -m "$m" -c 1k
        bad "$c: -b -1" 2 "--batch" "'-1'" -- "$MOEX_BIN" $c "$@" -m "$m" -b -1
        bad "$c: --kv-type q8" 2 "--kv-type" "'q8'" -- "$MOEX_BIN" $c "$@" -m "$m" --kv-type q8
    fi
    bad "$c: --device gpu" 2 "--device" "'gpu'" -- "$MOEX_BIN" $c "$@" -m "$m" --device gpu
    bad "$c: --hot-budget lots" 2 "--hot-budget" "'lots'" -- "$MOEX_BIN" $c "$@" -m "$m" --device cpu --hot-budget lots
    bad "$c: --hot-budget 150%" 2 "--hot-budget" "'150'" -- "$MOEX_BIN" $c "$@" -m "$m" --device cpu --hot-budget 150%
    bad "$c: --hot-budget -1G" 2 "--hot-budget" "'-1G'" -- "$MOEX_BIN" $c "$@" -m "$m" --device cpu --hot-budget -1G
    [ "$c" = pack ] || bad "$c: --min-m 0" 2 "--min-m" "'0'" -- "$MOEX_BIN" $c "$@" -m "$m" --device cpu --min-m 0
    bad "$c: --sim unknown figure" 2 "--sim" "'rk3588,nokey=1'" "unknown figure 'nokey'" -- \
        "$MOEX_BIN" $c "$@" -m "$m" --device sim --sim rk3588,nokey=1
    bad "$c: --sim figure out of range" 2 "--sim" "'cores=-2'" -- "$MOEX_BIN" $c "$@" -m "$m" --device sim --sim cores=-2
    [ "$c" = pack ] ||
        bad "$c: --pack with --no-pack" 2 "--pack" "--no-pack" -- "$MOEX_BIN" $c "$@" -m "$m" --device cpu --pack "$tmp/p" --no-pack
    bad "$c: unknown option" 2 "'--frobnicate'" -- "$MOEX_BIN" $c "$@" -m "$m" --frobnicate
    # Variables: a value, never mere presence; an option given overrides its variable.
    bad "$c: MOEX_DEVICE=bogus" 2 "MOEX_DEVICE" "'bogus'" -- env MOEX_DEVICE=bogus "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_HOT_BUDGET=lots" 2 "MOEX_HOT_BUDGET" "'lots'" -- env MOEX_HOT_BUDGET=lots "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_MIN_M=0" 2 "MOEX_MIN_M" "'0'" -- env MOEX_MIN_M=0 "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_OVERLAP=maybe" 2 "MOEX_OVERLAP" "'maybe'" -- env MOEX_OVERLAP=maybe "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_SIM=nokey=1" 2 "MOEX_SIM" "'nokey=1'" -- env MOEX_SIM=nokey=1 "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_STATS empty" 2 "MOEX_STATS" "''" -- env MOEX_STATS= "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_PACK empty" 2 "MOEX_PACK" "''" -- env MOEX_PACK= "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_ISA=bogus" 2 "MOEX_ISA" "'bogus'" -- env MOEX_ISA=bogus "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_INTERLEAVE=bogus" 2 "MOEX_INTERLEAVE" "'bogus'" -- env MOEX_INTERLEAVE=bogus "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: MOEX_CACHE empty" 2 "MOEX_CACHE" "''" -- env MOEX_CACHE= "$MOEX_BIN" $c "$@" -m "$m"
    bad "$c: --isa bogus" 2 "--isa" "'bogus'" -- "$MOEX_BIN" $c "$@" -m "$m" --isa bogus
    ok "$c: MOEX_DEVICE=bogus does not break --help" env MOEX_DEVICE=bogus MOEX_ISA=bogus "$MOEX_BIN" $c --help
done
if [ -n "$serve" ]; then
    bad "serve: --host 999.1.1.1" 2 "--host" "'999.1.1.1'" -- "$MOEX_BIN" serve -m "$m" --host 999.1.1.1
    bad "serve: --port 70000" 2 "--port" "'70000'" -- "$MOEX_BIN" serve -m "$m" --port 70000
    bad "serve: --parallel 0" 2 "--parallel" "'0'" -- "$MOEX_BIN" serve -m "$m" --parallel 0
fi
ok "run: --device overrides a bad MOEX_DEVICE" env MOEX_DEVICE=bogus "$MOEX_BIN" run -m "$m" --device none -n 1
ok "run: --hot-budget overrides a bad MOEX_HOT_BUDGET" env MOEX_HOT_BUDGET=lots "$MOEX_BIN" run -m "$m" --hot-budget 50% -n 1
ok "run: --sim overrides a bad MOEX_SIM" env MOEX_SIM=nokey=1 "$MOEX_BIN" run -m "$m" --sim rk3588 -n 1
ok "run: --no-pack overrides a bad MOEX_PACK" env MOEX_PACK= "$MOEX_BIN" run -m "$m" --no-pack -n 1

# --hot-budget's units (K, M, G, T, either case) multiply: 8 bytes hold no
# expert of the tiny model, 8M and 8m hold them all.
for b in 8M 8m 1G 1t 8192k; do
    ok "run: --hot-budget $b" "$MOEX_BIN" run -m "$m" --device cpu --hot-budget "$b" -n 1
    ! grep -q "holds no expert" "$tmp/err" || { echo "FAIL: --hot-budget $b holds no expert: $(cat "$tmp/err")"; fail=1; }
done
ok "run: --hot-budget 8" "$MOEX_BIN" run -m "$m" --device cpu --hot-budget 8 -n 1
grep -q "holds no expert" "$tmp/err" || { echo "FAIL: --hot-budget 8 (bytes) said no note: $(cat "$tmp/err")"; fail=1; }

# Sampling options (run and chat).
for c in run chat; do
    bad "$c: --temp warm" 2 "--temp" "'warm'" -- "$MOEX_BIN" $c -m "$m" --temp warm
    bad "$c: --temp nan" 2 "--temp" "'nan'" -- "$MOEX_BIN" $c -m "$m" --temp nan
    bad "$c: --temp -1" 2 "--temp" "'-1'" -- "$MOEX_BIN" $c -m "$m" --temp -1
    bad "$c: --top-k -1" 2 "--top-k" "'-1'" -- "$MOEX_BIN" $c -m "$m" --top-k -1
    bad "$c: --top-p 2" 2 "--top-p" "'2'" -- "$MOEX_BIN" $c -m "$m" --top-p 2
    bad "$c: --min-p 1.5" 2 "--min-p" "'1.5'" -- "$MOEX_BIN" $c -m "$m" --min-p 1.5
    bad "$c: --repeat-penalty 0" 2 "--repeat-penalty" "'0'" -- "$MOEX_BIN" $c -m "$m" --repeat-penalty 0
    bad "$c: --repeat-last-n x" 2 "--repeat-last-n" "'x'" -- "$MOEX_BIN" $c -m "$m" --repeat-last-n x
    bad "$c: --seed -2" 2 "--seed" "'-2'" -- "$MOEX_BIN" $c -m "$m" --seed -2
    bad "$c: --seed 2^64" 2 "--seed" "'18446744073709551616'" -- "$MOEX_BIN" $c -m "$m" --seed 18446744073709551616
    bad "$c: -n -2" 2 "--n-predict" "'-2'" -- "$MOEX_BIN" $c -m "$m" -n -2
    bad "$c: --temp without a value" 2 "--temp" -- "$MOEX_BIN" $c -m "$m" --temp
done
bad "chat: -n 0" 2 "--n-predict" "'0'" -- "$MOEX_BIN" chat -m "$m" -n 0
bad "chat: empty --system" 2 "--system" "''" -- "$MOEX_BIN" chat -m "$m" --system ""

# run
bad "run: -p with -f" 2 "-p" "-f" -- "$MOEX_BIN" run -m "$m" -p hi -f "$tmp/x"
bad "run: -p with --tokens" 2 "-p" "--tokens" -- "$MOEX_BIN" run -m "$m" -p hi --tokens 1
bad "run: empty -p" 2 "-p" "''" -- "$MOEX_BIN" run -m "$m" -p ""
bad "run: --tokens 1,,2 (D6)" 2 "--tokens" "'1,,2'" -- "$MOEX_BIN" run -m "$m" --tokens 1,,2 -n 1
bad "run: --tokens 1,2, (D6)" 2 "--tokens" "'1,2,'" -- "$MOEX_BIN" run -m "$m" --tokens 1,2, -n 1
bad "run: --tokens ,1" 2 "--tokens" "',1'" -- "$MOEX_BIN" run -m "$m" --tokens ,1 -n 1
bad "run: --tokens 1,x" 2 "--tokens" "'x'" -- "$MOEX_BIN" run -m "$m" --tokens 1,x -n 1
bad "run: --tokens 1,2,99999 out of the vocabulary" 2 "--tokens" "'99999'" -- "$MOEX_BIN" run -m "$m" --tokens 1,2,99999 -n 1
bad "run: --tokens -1" 2 "--tokens" "'-1'" -- "$MOEX_BIN" run -m "$m" --tokens -1 -n 1
bad "run: --tokens 1,a long bad item (D6)" 2 "--tokens" "'${long_item}x'" -- "$MOEX_BIN" run -m "$m" --tokens "1,${long_item}x" -n 1
bad "run: -n 2^24+1" 2 "--n-predict" "'16777217'" -- "$MOEX_BIN" run -m "$m" -n 16777217
bad "run: a prompt longer than --ctx" 2 "--ctx" "does not fit" -- "$MOEX_BIN" run -m "$m" --tokens 1,2,3,4,5 -c 4 -n 1
printf '' > "$tmp/empty.txt"
bad "run: an empty -f file" 2 "-f" "$tmp/empty.txt" "empty" -- "$MOEX_BIN" run -m "$m" -f "$tmp/empty.txt"
bad "run: -f a directory (D7)" 1 "-f" "$tmp" "Is a directory" -- "$MOEX_BIN" run -m "$m" -f "$tmp"
bad "run: -f a missing file" 1 "-f" "$tmp/none.txt" "No such file or directory" -- "$MOEX_BIN" run -m "$m" -f "$tmp/none.txt"
bad "run: -m a missing file" 1 "$tmp/none.gguf" "No such file or directory" -- "$MOEX_BIN" run -m "$tmp/none.gguf"

# eval
bad "eval: --tokens with --tokens-file (D6)" 2 "--tokens" "--tokens-file" -- \
    "$MOEX_BIN" eval -m "$m" --tokens 1 --tokens-file "$tmp/ids" --logits "$tmp/l"
bad "eval: no --logits" 2 "--logits" -- "$MOEX_BIN" eval -m "$m" --tokens 1
bad "eval: --tokens 1,,2 (D6)" 2 "--tokens" "'1,,2'" -- "$MOEX_BIN" eval -m "$m" --tokens 1,,2 --logits "$tmp/l"
bad "eval: --tokens out of the vocabulary" 2 "--tokens" "'512'" -- "$MOEX_BIN" eval -m "$m" --tokens 1,512 --logits "$tmp/l"
printf '1 2\nx 3\n' > "$tmp/ids"
bad "eval: a bad id in --tokens-file" 2 "--tokens-file" "'x'" -- "$MOEX_BIN" eval -m "$m" --tokens-file "$tmp/ids" --logits "$tmp/l"
printf '1 2 9999\n' > "$tmp/ids"
bad "eval: --tokens-file id out of the vocabulary" 2 "--tokens-file" "'9999'" -- \
    "$MOEX_BIN" eval -m "$m" --tokens-file "$tmp/ids" --logits "$tmp/l"
printf ' ,\n' > "$tmp/ids"
bad "eval: --tokens-file without ids" 2 "--tokens-file" "no token ids" -- "$MOEX_BIN" eval -m "$m" --tokens-file "$tmp/ids" --logits "$tmp/l"
bad "eval: --tokens-file a directory" 1 "--tokens-file" "Is a directory" -- "$MOEX_BIN" eval -m "$m" --tokens-file "$tmp" --logits "$tmp/l"

# tokenize
bad "tokenize: -p with -f" 2 "-p" "-f" -- "$MOEX_BIN" tokenize -m "$m" -p hi -f "$tmp/x"
bad "tokenize: neither -p nor -f" 2 "-p" "-f" -- "$MOEX_BIN" tokenize -m "$m"
bad "tokenize: -m without a value" 2 "-m" -- "$MOEX_BIN" tokenize -p hi -m
bad "tokenize: unknown option" 2 "'--frobnicate'" -- "$MOEX_BIN" tokenize -m "$m" -p hi --frobnicate
bad "tokenize: MOEX_ISA=bogus" 2 "MOEX_ISA" "'bogus'" -- env MOEX_ISA=bogus "$MOEX_BIN" tokenize -m "$m" -p hi
[ -r /proc/self/mem ] && bad "tokenize: -f a file that fails to read" 1 "-f" "/proc/self/mem" "Input/output error" -- \
    "$MOEX_BIN" tokenize -m "$m" -f /proc/self/mem
bad "tokenize: -f a directory (D7)" 1 "-f" "Is a directory" -- "$MOEX_BIN" tokenize -m "$m" -f "$tmp"

# bench
bad "bench: -p 0 -n 0" 2 "--n-prompt" "--n-gen" -- "$MOEX_BIN" bench -m "$m" -p 0 -n 0
bad "bench: -p 1,,2" 2 "--n-prompt" "'1,,2'" -- "$MOEX_BIN" bench -m "$m" -p 1,,2
bad "bench: -n x" 2 "--n-gen" "'x'" -- "$MOEX_BIN" bench -m "$m" -n x
bad "bench: -r 0" 2 "--repetitions" "'0'" -- "$MOEX_BIN" bench -m "$m" -r 0
bad "bench: --ctx shorter than a test" 2 "--ctx" "16" -- "$MOEX_BIN" bench -m "$m" -p 16 -n 0 -c 8

# info
bad "info: unknown option" 2 "'--frobnicate'" -- "$MOEX_BIN" info --frobnicate "$m"
bad "info: MOEX_CACHE empty" 2 "MOEX_CACHE" "''" -- env MOEX_CACHE= "$MOEX_BIN" info
bad "info: a missing file" 1 "$tmp/none.gguf" "No such file or directory" -- "$MOEX_BIN" info "$tmp/none.gguf"

# synth
bad "synth: no -o" 2 "-o" -- "$MOEX_BIN" synth --preset tiny
bad "synth: --preset huge" 2 "--preset" "'huge'" -- "$MOEX_BIN" synth --preset huge -o "$tmp/x.gguf"
bad "synth: --arch bogus" 2 "--arch" "'bogus'" -- "$MOEX_BIN" synth --arch bogus -o "$tmp/x.gguf"
bad "synth: a preset of another --arch" 2 "--preset tiny is a qwen3moe preset, not lfm2moe" -- \
    "$MOEX_BIN" synth --arch lfm2moe --preset tiny -o "$tmp/x.gguf"
bad "synth: --type q3_k" 2 "--type" "'q3_k'" -- "$MOEX_BIN" synth --preset tiny --type q3_k -o "$tmp/x.gguf"
bad "synth: --layers 0" 2 "--layers" "'0'" -- "$MOEX_BIN" synth --preset tiny --layers 0 -o "$tmp/x.gguf"
bad "synth: --dim 2^31" 2 "--dim" "'2147483648'" -- "$MOEX_BIN" synth --preset tiny --dim 2147483648 -o "$tmp/x.gguf"
bad "synth: --top-k above --experts" 2 "top-k 9" "8 experts" -- "$MOEX_BIN" synth --preset tiny --top-k 9 -o "$tmp/x.gguf"
bad "synth: --heads not a multiple of --kv-heads" 2 "heads 3" "kv-heads 2" -- \
    "$MOEX_BIN" synth --preset tiny --heads 3 --kv-heads 2 -o "$tmp/x.gguf"
bad "synth: --vocab 100 (the built-in vocabulary)" 2 "--vocab" "'100'" -- "$MOEX_BIN" synth --preset tiny --vocab 100 -o "$tmp/x.gguf"
bad "synth: --head-dim odd" 2 "head-dim 33" -- "$MOEX_BIN" synth --preset tiny --head-dim 33 -o "$tmp/x.gguf"
bad "synth: --skew -1" 2 "--skew" "'-1'" -- "$MOEX_BIN" synth --preset tiny --skew -1 -o "$tmp/x.gguf"
bad "synth: --locality 2" 2 "--locality" "'2'" -- "$MOEX_BIN" synth --preset tiny --locality 2 -o "$tmp/x.gguf"
bad "synth: --rope-base 0" 2 "--rope-base" "'0'" -- "$MOEX_BIN" synth --preset tiny --rope-base 0 -o "$tmp/x.gguf"
bad "synth: --rope-base inf" 2 "--rope-base" "'inf'" -- "$MOEX_BIN" synth --preset tiny --rope-base inf -o "$tmp/x.gguf"
bad "synth: --seed x" 2 "--seed" "'x'" -- "$MOEX_BIN" synth --preset tiny --seed x -o "$tmp/x.gguf"
bad "synth: empty --name" 2 "--name" "''" -- "$MOEX_BIN" synth --preset tiny --name "" -o "$tmp/x.gguf"
bad "synth: MOEX_ISA=bogus" 2 "MOEX_ISA" "'bogus'" -- env MOEX_ISA=bogus "$MOEX_BIN" synth --preset tiny -o "$tmp/x.gguf"
[ ! -e "$tmp/x.gguf" ] || { echo "FAIL: a refused synth wrote its output"; fail=1; }

# profile
bad "profile: -n is renamed" 2 "-n" "--random-tokens" -- "$MOEX_BIN" profile -m "$m" -n 5 -o "$tmp/s"
bad "profile: --tokens is renamed" 2 "--tokens" "--random-tokens" -- "$MOEX_BIN" profile -m "$m" --tokens 5 -o "$tmp/s"
bad "profile: --random-tokens 0" 2 "--random-tokens" "'0'" -- "$MOEX_BIN" profile -m "$m" --random-tokens 0 -o "$tmp/s"
bad "profile: -f with --random-tokens" 2 "-f" "--random-tokens" -- \
    "$MOEX_BIN" profile -m "$m" --random-tokens 5 -f "$tmp/x" -o "$tmp/s"
bad "profile: no -o" 2 "-o" -- "$MOEX_BIN" profile -m "$m" --random-tokens 5
bad "profile: --seq 0" 2 "--seq" "'0'" -- "$MOEX_BIN" profile -m "$m" --seq 0 -o "$tmp/s"
bad "profile: --seq longer than --ctx" 2 "--seq 64" "--ctx" -- "$MOEX_BIN" profile -m "$m" --seq 64 -c 32 -o "$tmp/s"
bad "profile: -f a directory (D7)" 1 "-f" "Is a directory" -- "$MOEX_BIN" profile -m "$m" -f "$tmp" -o "$tmp/s"

# probe
bad "probe: --device none" 2 "--device" "'none'" -- "$MOEX_BIN" probe --device none
bad "probe: --shape 100x5" 2 "--shape" "'100'" -- "$MOEX_BIN" probe --shape 100x5
bad "probe: --shape 512x" 2 "--shape" "''" -- "$MOEX_BIN" probe --shape 512x
bad "probe: --shape square" 2 "--shape" "'square'" -- "$MOEX_BIN" probe --shape square
bad "probe: --shape 768x8 (K not a multiple of 256)" 2 "--shape" "768" -- "$MOEX_BIN" probe --shape 768x8
bad "probe: --m 0" 2 "--m" "'0'" -- "$MOEX_BIN" probe --m 0
bad "probe: --m 1,,2" 2 "--m" "'1,,2'" -- "$MOEX_BIN" probe --m 1,,2
bad "probe: -t 0" 2 "--threads" "'0'" -- "$MOEX_BIN" probe -t 0
bad "probe: --sim unknown figure" 2 "--sim" "'nokey=1'" "unknown figure 'nokey'" -- "$MOEX_BIN" probe --device sim --sim nokey=1
bad "probe: --sim-preset rk9999" 2 "--sim-preset" "'rk9999'" -- "$MOEX_BIN" probe --device sim --sim-preset rk9999
bad "probe: MOEX_ISA=bogus" 2 "MOEX_ISA" "'bogus'" -- env MOEX_ISA=bogus "$MOEX_BIN" probe --device sim

# pack
bad "pack: --device bogus" 2 "--device" "'bogus'" -- "$MOEX_BIN" pack -m "$m" --device bogus -o "$tmp/p.mxpk"
bad "pack: no --device" 2 "--device" "required" -- "$MOEX_BIN" pack -m "$m" -o "$tmp/p.mxpk"
bad "pack: -o without a value" 2 "-o" -- "$MOEX_BIN" pack -m "$m" --device cpu -o
bad "pack: --sim unknown figure" 2 "--sim" "'warp=9'" -- "$MOEX_BIN" pack -m "$m" --device sim --sim warp=9 -o "$tmp/p.mxpk"
[ ! -e "$tmp/p.mxpk" ] || { echo "FAIL: a refused pack wrote its output"; fail=1; }

# Values that parse but were once out of reach of the checks.
bad "--hot-budget 1e400" 2 "--hot-budget" "'1e400'" -- "$MOEX_BIN" run -m "$m" --device cpu --hot-budget 1e400
bad "--hot-budget nan%" 2 "--hot-budget" "'nan'" -- "$MOEX_BIN" run -m "$m" --device cpu --hot-budget nan%
bad "-c 2^31" 2 "--ctx" "'2147483648'" -- "$MOEX_BIN" run -m "$m" -c 2147483648
exit $fail
