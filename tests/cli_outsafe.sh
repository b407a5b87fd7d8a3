#!/bin/sh
# Output safety: nothing a user owns is lost or left half-written. Each
# writer (synth -o, pack -o, eval --logits, profile -o, --trace, the default
# model) is killed with SIGINT and SIGKILL in the middle of writing its file,
# after its fsync and after its temporary got a name (strace delivers the
# signal on a chosen system call, so the moment is exact, not timed), and is
# starved (a full tmpfs where one can be mounted, and RLIMIT_FSIZE): the old
# file stays byte for byte, no temporary is left, a starved writer exits 1
# with errno's text and no "wrote" line. Also: a run reading a model that
# synth rewrites meanwhile finishes with the old model's tokens (D2); an
# output in a missing directory fails before any work (D8); an output that
# is one of the inputs is refused with status 2 naming both options (D9).
set -u
B=$MOEX_BIN
tmp=${OUTSAFE_TMP:-${MOEX_TEST_TMP:-/tmp}/cli_outsafe.$$}
OUTSAFE_TMP=$tmp
export B OUTSAFE_TMP

# The writers: writer NAME OUT runs the command that writes OUT, prefixed by $wrap.
ids=$(seq -s, 1 64)
writer() {
    case $1 in
    synth) $wrap "$B" synth --preset tiny --type q8_0 --seed 9 -q -t 1 -o "$2" ;;
    pack) $wrap "$B" pack -m "$tmp/in/m.gguf" --device cpu -q -t 1 -o "$2" ;;
    logits) $wrap "$B" eval -m "$tmp/in/m.gguf" --tokens "$ids" -t 1 --logits "$2" ;;
    stats) $wrap "$B" profile -m "$tmp/in/wide.gguf" --random-tokens 64 --seq 32 -q -t 1 -o "$2" ;;
    trace) $wrap "$B" run -m "$tmp/in/m.gguf" --tokens 1,2,3 -n 64 --ignore-eos --print-ids -t 1 --trace "$2" ;;
    default) MOEX_CACHE=$(dirname "$2") $wrap "$B" tokenize -p hi ;; # OUT is DIR/small.gguf
    esac
}

# Inside a new user and mount namespace: a full tmpfs at $tmp/full holding
# only the old file; the writer must fail with ENOSPC and leave it alone.
if [ "${1:-}" = enospc ]; then
    w=$2; name=$3; out=$tmp/full/$name; wrap=
    mount -t tmpfs -o size=8k tmpfs "$tmp/full" || exit 99
    [ "$name" = small.gguf ] || printf 'old %s, keep me\n' "$name" > "$out"
    ls -A "$tmp/full" > "$tmp/before.full"
    [ -e "$out" ] && cp "$out" "$tmp/old.full"
    writer "$w" "$out" > "$tmp/log.full" 2>&1; rc=$?
    st=0
    [ "$rc" -eq 1 ] || { echo "FAIL: $name on a full disk: exit $rc, wanted 1"; st=1; }
    grep -q "No space left on device" "$tmp/log.full" || { echo "FAIL: $name on a full disk: no errno text"; st=1; }
    ! grep -q "wrote" "$tmp/log.full" || { echo "FAIL: $name on a full disk: a 'wrote' line"; st=1; }
    [ ! -e "$tmp/old.full" ] || cmp -s "$out" "$tmp/old.full" || { echo "FAIL: $name on a full disk: old file changed"; st=1; }
    ls -A "$tmp/full" | cmp -s "$tmp/before.full" - || { echo "FAIL: $name on a full disk: left $(ls -A "$tmp/full")"; st=1; }
    [ "$st" -ne 0 ] || echo "ok: $name on a full disk"
    [ "$st" -eq 0 ] || cat "$tmp/log.full"
    rm -f "$tmp/old.full"
    exit $st
fi

fail=0
skipped=""
bad() { echo "FAIL: $*"; fail=1; }
rm -rf "$tmp"
mkdir -p "$tmp/in" "$tmp/out" "$tmp/full" "$tmp/out/cache"
wrap=
"$B" synth --preset tiny --type q8_0 --seed 3 -q -o "$tmp/in/m.gguf" || exit 1
"$B" synth --preset tiny --type q8_0 --experts 64 --top-k 2 --seed 4 -q -o "$tmp/in/wide.gguf" || exit 1

file_of() { # the output's name per writer
    case $1 in synth) echo model.gguf ;; pack) echo m.mxpk ;; logits) echo logits.bin ;;
    stats) echo stats.bin ;; trace) echo trace.json ;; default) echo cache/small.gguf ;; esac
}
put_old() { # an old file at OUT (none for the default model, which is made only when absent)
    case $1 in */small.gguf) rm -f "$1" ;; *) printf 'old %s, keep me\n' "$1" > "$1" ;; esac
}
same_as_before() { # what, OUT: the old file is byte for byte there, and nothing else is new
    [ ! -e "$tmp/old" ] || cmp -s "$2" "$tmp/old" || bad "$1: the old file changed"
    [ -e "$tmp/old" ] || [ ! -e "$2" ] || bad "$1: a file appeared"
    ls -A "$tmp/out" "$tmp/out/cache" | cmp -s "$tmp/before" - || bad "$1: left behind: $(ls -A "$tmp/out" "$tmp/out/cache")"
}
snapshot() { # OUT
    put_old "$1"
    rm -f "$tmp/old"
    [ ! -e "$1" ] || cp "$1" "$tmp/old"
    ls -A "$tmp/out" "$tmp/out/cache" > "$tmp/before"
}

# ---- killed: strace delivers the signal on the Nth call of a system call
# (LeakSanitizer cannot run under ptrace: a traced run that ends normally
# would fail for that alone.)
trace="strace -E ASAN_OPTIONS=detect_leaks=0 -f -qq"
strace_ok=0
if command -v strace > /dev/null 2>&1 && $trace -o /dev/null -e trace=write true 2>/dev/null; then
    strace_ok=1
fi
# Which write of the main thread is the middle one of those writing into $tmp/out (from a dry run).
middle_write() { # writer
    out=$tmp/out/$(file_of "$1")
    snapshot "$out"
    wrap="$trace -y -o $tmp/dry.log -e trace=write"
    writer "$1" "$out" > /dev/null 2>&1
    wrap=
    put_old "$out"
    middle_of "$tmp/dry.log"
}
middle_of() { # a log of strace -y -e trace=write,...: the middle write into $tmp/out
    main=$(head -n 1 "$1" | cut -d' ' -f1)
    grep "^$main  *write(" "$1" | grep -n "<$tmp/out/" | cut -d: -f1 |
        awk '{ n[NR] = $1 } END { if (NR) print n[int((NR + 1) / 2)] }'
}
killed() { # writer, signal, syscall, which call (the log in $tmp/kill.log also has the writes, with -y)
    w=$1 sig=$2 call=$3 nth=$4 failed=$fail
    fail=0
    out=$tmp/out/$(file_of "$w")
    snapshot "$out"
    wrap="$trace -y -o $tmp/kill.log -e trace=write,$call -e inject=$call:signal=$sig:when=$nth"
    writer "$w" "$out" > "$tmp/stdout" 2> "$tmp/err"; rc=$?
    wrap=
    what="$w killed by SIG$sig at $call #$nth"
    case $sig in INT) want=130 ;; KILL) want=137 ;; TERM) want=143 ;; HUP) want=129 ;; PIPE) want=141 ;; esac
    grep -q "killed by SIG$sig" "$tmp/kill.log" || bad "$what: the signal did not land (exit $rc)"
    [ "$rc" -eq "$want" ] || bad "$what: exit $rc, wanted $want"
    same_as_before "$what" "$out"
    [ "$fail" -ne 0 ] || echo "ok: $what"
    [ "$failed" -eq 0 ] || fail=1
}
# Where O_TMPFILE fails (strace makes it fail with EOPNOTSUPP), the temporary
# has a name from the start: the signal handler must remove it.
tmpfile_call() { # writer: which openat of the main thread is the last O_TMPFILE one (synth probes -o first)
    out=$tmp/out/$(file_of "$1")
    snapshot "$out"
    wrap="$trace -o $tmp/dry.log -e trace=openat"
    writer "$1" "$out" > /dev/null 2>&1
    wrap=
    put_old "$out"
    main=$(head -n 1 "$tmp/dry.log" | cut -d' ' -f1)
    grep "^$main  *openat(" "$tmp/dry.log" | grep -n "O_TMPFILE" | tail -n 1 | cut -d: -f1
}
named_killed() { # writer, signal, the write to signal on
    w=$1 sig=$2 nth=$3 failed=$fail
    fail=0
    k=$(tmpfile_call "$w")
    out=$tmp/out/$(file_of "$w")
    snapshot "$out"
    wrap="$trace -o $tmp/kill.log -e trace=openat,write -e inject=openat:error=EOPNOTSUPP:when=$k"
    wrap="$wrap -e inject=write:signal=$sig:when=$nth"
    writer "$w" "$out" > "$tmp/stdout" 2> "$tmp/err"; rc=$?
    wrap=
    what="$w with a named temporary, killed by SIG$sig at write #$nth"
    grep -q "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC" "$tmp/kill.log" || bad "$what: no named temporary was made"
    grep -q "killed by SIG$sig" "$tmp/kill.log" || bad "$what: the signal did not land (exit $rc)"
    same_as_before "$what" "$out"
    [ "$fail" -ne 0 ] || echo "ok: $what"
    [ "$failed" -eq 0 ] || fail=1
}
if [ "$strace_ok" -eq 1 ]; then
    for w in synth logits trace; do
        mid=$(middle_write "$w")
        named_killed "$w" INT "$mid"
        named_killed "$w" TERM "$mid"
    done
    for w in synth pack logits stats trace default; do
        killed "$w" INT linkat 1    # the temporary has a name: the handler removes it
        mid=$(middle_of "$tmp/kill.log") # every write came before the linkat
        [ -n "$mid" ] || { bad "$w: the run shows no write into the output directory"; continue; }
        killed "$w" INT write "$mid"
        killed "$w" KILL write "$mid"
        [ "$w" = default ] || killed "$w" INT fsync 1 # the data is complete, the temporary has no name yet
        [ "$w" = default ] || killed "$w" KILL fsync 1 # (the default model takes seconds: fewer runs)
    done
    killed logits TERM linkat 1
    killed logits HUP linkat 1
    killed logits PIPE linkat 1
else
    skipped="strace cannot trace here: the kills mid-write did not run"
fi

# ---- starved: RLIMIT_FSIZE (SIGXFSZ ignored, so write() fails with EFBIG)
for w in synth pack logits stats trace default; do
    out=$tmp/out/$(file_of "$w")
    snapshot "$out"
    { (ulimit -f 2; writer "$w" "$out"); echo $? > "$tmp/rc"; } 2>&1 | cat > "$tmp/log"
    rc=$(cat "$tmp/rc")
    what="$w over a file size limit"
    failed=$fail
    fail=0
    [ "$rc" -eq 1 ] || bad "$what: exit $rc, wanted 1"
    grep -q "File too large" "$tmp/log" || bad "$what: no errno text: $(cat "$tmp/log")"
    grep -q "$out" "$tmp/log" || bad "$what: the message does not name $out"
    ! grep -q "wrote" "$tmp/log" || bad "$what: a 'wrote' line: $(cat "$tmp/log")"
    same_as_before "$what" "$out"
    [ "$fail" -ne 0 ] || echo "ok: $what"
    [ "$failed" -eq 0 ] || fail=1
done

# D8: a new output that does not fit leaves no file (it left a 0-byte one)
out=$tmp/out/new-logits.bin
{ (ulimit -f 2; writer logits "$out"); echo $? > "$tmp/rc"; } 2>&1 | cat > "$tmp/log"
[ "$(cat "$tmp/rc")" -eq 1 ] && [ ! -e "$out" ] && echo "ok: a new output over a file size limit leaves no file" ||
    bad "a new output over a file size limit: exit $(cat "$tmp/rc"), $(ls -l "$out" 2>&1)"

# ---- starved: a full tmpfs, where a user and mount namespace can be made
if unshare -rm sh -c "mount -t tmpfs -o size=8k tmpfs '$tmp/full'" 2>/dev/null; then
    for w in synth pack logits stats trace default; do
        name=$(basename "$(file_of "$w")")
        unshare -rm sh "$0" enospc "$w" "$name" || fail=1
    done
else
    echo "note: no tmpfs can be mounted here; the file size limit above stands for a full disk"
fi

# ---- D2: a running moex keeps reading the model that synth replaces
# meanwhile. strace stops the run (SIGSTOP) at its first write, the prompt's
# echo, once the model is mapped; the model is then rewritten smaller (in
# place, the run's pages past the new end would be SIGBUS); the run, let go,
# must give the old model's text.
model=$tmp/in/live.gguf
"$B" synth --preset tiny --type q8_0 --layers 3 --seed 5 -q -o "$model"
cp "$model" "$tmp/in/live-copy.gguf"
"$B" profile -m "$model" --random-tokens 8 -q -o "$tmp/in/live.stats" > /dev/null 2>&1
if [ "$strace_ok" -eq 1 ]; then
    "$B" run -m "$tmp/in/live-copy.gguf" -p "Once upon" -n 16 --seed 1 -t 1 > "$tmp/want.txt" 2> /dev/null
    rm -f "$tmp/stop.log"
    $trace -o "$tmp/stop.log" -e trace=write -e inject=write:signal=STOP:when=1 \
        "$B" run -m "$model" -p "Once upon" -n 16 --seed 1 -t 1 > "$tmp/got.txt" 2> "$tmp/run.err" &
    pid=$!
    tries=0 # bounded: the stop comes within the run's start-up
    while ! grep -q "SIGSTOP" "$tmp/stop.log" 2>/dev/null && [ "$tries" -lt 1200 ]; do tries=$((tries + 1)); sleep 0.05; done
    tracee=$(head -n 1 "$tmp/stop.log" | cut -d' ' -f1)
    grep -q "$model" "/proc/$tracee/maps" 2>/dev/null || bad "the stopped run has not mapped its model"
    "$B" synth --preset tiny --type q8_0 --layers 1 --seed 6 -q -o "$model" || bad "synth over a model in use failed"
    kill -CONT "$tracee"
    wait "$pid"; rc=$?
    [ "$rc" -eq 0 ] || bad "a run whose model synth replaced: exit $rc ($(tail -n 2 "$tmp/stop.log"))"
    cmp -s "$tmp/want.txt" "$tmp/got.txt" && echo "ok: a run whose model synth replaced kept reading the old one" ||
        bad "a run whose model synth replaced gave other text"
fi

# ---- D8: an output that cannot be created fails at once, before any work
# (here: before the default model is made).
mkdir -p "$tmp/cache8"
MOEX_CACHE=$tmp/cache8 "$B" run --trace "$tmp/missing/dir/t.json" -n 4 > "$tmp/stdout" 2> "$tmp/err"; rc=$?
[ "$rc" -eq 1 ] || bad "run --trace into a missing directory: exit $rc, wanted 1"
grep -q "$tmp/missing/dir/t.json: cannot create: No such file or directory" "$tmp/err" ||
    bad "run --trace into a missing directory: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp/cache8")" ] && [ ! -s "$tmp/stdout" ] || bad "run --trace into a missing directory ran first"
"$B" synth --preset q30b -o "$tmp/missing/m.gguf" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "$tmp/missing/m.gguf: cannot create: No such file or directory" "$tmp/err" ||
    bad "synth -o into a missing directory: exit $rc, $(cat "$tmp/err")"
MOEX_CACHE=$tmp/cache8 "$B" eval --tokens 1,2 --logits "$tmp/missing/l.bin" > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "No such file or directory" "$tmp/err" && [ -z "$(ls -A "$tmp/cache8")" ] ||
    bad "eval --logits into a missing directory: exit $rc, $(cat "$tmp/err")"

# ---- D9: an output that is an input is refused (status 2, both options named), the input untouched
m=$tmp/in/m.gguf
cp "$m" "$tmp/m.orig"
ln -f "$m" "$tmp/in/hard.gguf"
ln -sf "$m" "$tmp/in/soft.gguf"
refused() { # what, the two options' names, command...
    what=$1 opts=$2 failed=$fail; shift 2
    fail=0
    "$@" > /dev/null 2> "$tmp/err"; rc=$?
    [ "$rc" -eq 2 ] || bad "$what: exit $rc, wanted 2"
    for o in $opts; do grep -q -- "$o" "$tmp/err" || bad "$what: the message does not name $o: $(cat "$tmp/err")"; done
    cmp -s "$m" "$tmp/m.orig" || bad "$what: the input changed"
    [ "$fail" -ne 0 ] || echo "ok: $what refused"
    [ "$failed" -eq 0 ] || fail=1
}
refused "pack -o the model" "-o -m" "$B" pack -m "$m" --device cpu -o "$m"
refused "pack -o a hard link of the model" "-o -m" "$B" pack -m "$m" --device cpu -o "$tmp/in/hard.gguf"
refused "eval --logits the model" "--logits -m" "$B" eval -m "$m" --tokens 1,2 --logits "$m"
refused "eval --logits a symlink of the model" "--logits -m" "$B" eval -m "$tmp/in/soft.gguf" --tokens 1,2 --logits "$m"
refused "eval --logits the tokens file" "--logits --tokens-file" sh -c 'echo 1 2 > "$1"; "$B" eval -m "$2" --tokens-file "$1" --logits "$1"' _ "$tmp/ids.txt" "$m"
refused "profile -o the model" "-o -m" "$B" profile -m "$m" --random-tokens 8 -o "$m"
refused "profile -o the stats it reads" "-o --stats" "$B" profile -m "$m" --random-tokens 8 --stats "$tmp/in/live.stats" -o "$tmp/in/live.stats"
refused "run --trace the model" "--trace -m" "$B" run -m "$m" --tokens 1 -n 1 --trace "$m"
refused "eval --trace and --logits one file" "--logits --trace" "$B" eval -m "$m" --tokens 1,2 --logits "$tmp/same" --trace "$tmp/same"
refused "synth -o the --vocab-from file" "-o --vocab-from" "$B" synth --preset tiny --vocab-from "$m" -o "$m"
mkdir -p "$tmp/cache9"
refused "pack -o the default model before it exists" "-o default" env MOEX_CACHE="$tmp/cache9" "$B" pack --device cpu -o "$tmp/cache9/small.gguf"
[ -z "$(ls -A "$tmp/cache9")" ] || bad "pack -o the default model made it first"
[ ! -e "$tmp/same" ] || bad "a refused eval left its output"

# Standard output on a full disk is a write failure too.
if [ -w /dev/full ]; then
    "$B" run -m "$m" --tokens 1,2 -n 4 --print-ids -t 1 > /dev/full 2> "$tmp/err"; rc=$?
    [ "$rc" -eq 1 ] && grep -q "standard output: write failed" "$tmp/err" &&
        echo "ok: standard output on a full disk" || bad "run > /dev/full: exit $rc, $(cat "$tmp/err")"
fi

rm -rf "$tmp"
[ "$fail" -eq 0 ] || exit 1
[ -z "$skipped" ] || { echo "SKIP: $skipped"; exit 77; }
exit 0
