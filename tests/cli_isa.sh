#!/bin/sh
# The command line maps MOEX_ISA / --isa and MOEX_INTERLEAVE / --no-interleave
# onto the library (which reads no environment itself): --profile says which
# CPU kernels ran and how many bytes of interleaved copies the model made;
# bench's cpu line says the kernels too.
set -u
fail=0
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_isa
cli_clean_env
"$MOEX_BIN" synth --preset tiny --type q4_k -o "$tmp/q4k.gguf" -q 2> "$tmp/err" || { echo "FAIL: synth"; cat "$tmp/err"; exit 1; }

# profile_line DESCRIPTION COMMAND...: the "CPU kernels" line of --profile into $line.
profile_line() {
    what=$1
    shift
    if ! "$@" run -m "$tmp/q4k.gguf" -p hi -n 2 -t 2 --no-pin --profile > /dev/null 2> "$tmp/err"; then
        echo "FAIL: $what: exit status"; sed 's/^/    /' "$tmp/err" | head -5; fail=1; line=; return
    fi
    line=$(grep 'moex profile: CPU kernels' "$tmp/err")
    [ -n "$line" ] || { echo "FAIL: $what: no CPU kernels line"; fail=1; }
}
line_has() { # description, text: the last profile line holds it
    case $line in *"$2"*) echo "ok: $1: $line" ;; *) echo "FAIL: $1: '$line' lacks '$2'"; fail=1 ;; esac
}

profile_line "default" "$MOEX_BIN"
default=$line
profile_line "MOEX_ISA=scalar" env MOEX_ISA=scalar "$MOEX_BIN"
line_has "MOEX_ISA=scalar" "CPU kernels scalar, interleaved weights 0.0 MiB"
line=; "$MOEX_BIN" run -m "$tmp/q4k.gguf" -p hi -n 2 -t 2 --no-pin --profile --isa scalar > /dev/null 2> "$tmp/err" &&
    line=$(grep 'moex profile: CPU kernels' "$tmp/err")
line_has "--isa scalar" "CPU kernels scalar"
line=; env MOEX_ISA=bogus "$MOEX_BIN" run -m "$tmp/q4k.gguf" -p hi -n 2 -t 2 --no-pin --profile --isa scalar \
    > /dev/null 2> "$tmp/err" && line=$(grep 'moex profile: CPU kernels' "$tmp/err")
line_has "--isa over a bad MOEX_ISA" "CPU kernels scalar"
profile_line "MOEX_INTERLEAVE=0" env MOEX_INTERLEAVE=0 "$MOEX_BIN"
line_has "MOEX_INTERLEAVE=0" "interleaved weights 0.0 MiB"
line=; "$MOEX_BIN" run -m "$tmp/q4k.gguf" -p hi -n 2 -t 2 --no-pin --profile --no-interleave > /dev/null 2> "$tmp/err" &&
    line=$(grep 'moex profile: CPU kernels' "$tmp/err")
line_has "--no-interleave" "interleaved weights 0.0 MiB"
# bench's cpu line says the kernels the run uses and what capped them, then
# what the CPU has (it listed only the CPU's features, whatever --isa said).
bench_cpu() { "$MOEX_BIN" bench -m "$tmp/q4k.gguf" -p 4 -n 0 -r 1 --no-roofline -t 1 --no-pin "$@" 2> "$tmp/err" | grep '^cpu:'; }
line=$(bench_cpu --isa scalar)
line_has "bench --isa scalar" "cpu: kernels scalar (capped by --isa scalar) of "
line=$(MOEX_ISA=scalar bench_cpu)
line_has "bench, MOEX_ISA=scalar" "cpu: kernels scalar (capped by MOEX_ISA scalar) of "
line=$(bench_cpu)
kernels=${default#*CPU kernels }
line_has "bench without a cap" "cpu: kernels ${kernels%%,*} of "
case $line in *"capped"*) echo "FAIL: bench without a cap says one: $line"; fail=1 ;; esac
case $default in
    *"CPU kernels scalar"*) echo "note: this CPU runs scalar kernels: the interleaved copies cannot be seen" ;;
    *"interleaved weights 0.0 MiB"*) echo "FAIL: default: no interleaved copies with SIMD kernels: $default"; fail=1 ;;
    *) echo "ok: default: $default"
       line=; env MOEX_INTERLEAVE=1 "$MOEX_BIN" run -m "$tmp/q4k.gguf" -p hi -n 2 -t 2 --no-pin --profile \
           > /dev/null 2> "$tmp/err" && line=$(grep 'moex profile: CPU kernels' "$tmp/err")
       [ "$line" = "$default" ] && echo "ok: MOEX_INTERLEAVE=1 is the default" ||
           { echo "FAIL: MOEX_INTERLEAVE=1: '$line', default '$default'"; fail=1; } ;;
esac
exit $fail
