# Shared start of the shell tests, sourced (. "$(dirname "$0")/shell_lib.sh"):
# functions only, nothing runs on sourcing.

# cli_tmpdir NAME: a scratch directory $tmp, removed when the test exits.
cli_tmpdir() {
    tmp=${MOEX_TEST_TMP:-/tmp}/$1.$$
    mkdir -p "$tmp"
    trap 'rm -rf "$tmp"' EXIT
}

# cli_clean_env: no MOEX_* from the caller's environment may change what is
# tested, and the default model is never the user's (call after cli_tmpdir).
cli_clean_env() {
    for v in $(env | sed -n 's/^\(MOEX_[A-Z_]*\)=.*/\1/p'); do
        case $v in MOEX_BIN|MOEX_TEST_TMP|MOEX_SRC|MOEX_ORACLE) ;; *) unset "$v" ;; esac
    done
    export MOEX_CACHE=$tmp/cache
}

# cli_build_default_model: like cli_clean_env, but the built-in default model
# is one made once per build ($MOEX_TEST_TMP/default-model), shared by the
# tests that use it, never the user's cache.
cli_build_default_model() {
    cli_clean_env
    export MOEX_CACHE="${MOEX_TEST_TMP:-/tmp}/default-model"
}

# cli_serve_needs: exits 77 (skipped, with the reason) without python3 for
# the HTTP clients or without moex serve's HTTP support.
cli_serve_needs() {
    command -v python3 > /dev/null || { echo "SKIP: no python3 for the HTTP client"; exit 77; }
    if "$MOEX_BIN" serve --help | grep -q "without HTTP support"; then
        echo "SKIP: this moex was built without HTTP support (libmicrohttpd-dev, libcjson-dev)"
        exit 77
    fi
}

# expect DESCRIPTION STATUS COMMAND...: runs it (stdout in $tmp/out, stderr
# in $tmp/err) and checks its exit status; a failure sets fail=1.
expect() {
    what=$1; want=$2; shift 2
    "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL: $what: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
    else echo "ok: $what"; fi
}

# says DESCRIPTION TEXT: the last expect's stderr holds TEXT.
says() {
    grep -qF -- "$2" "$tmp/err" || { echo "FAIL: $1: no '$2' in:"; cat "$tmp/err"; fail=1; }
}

# run_programs LABEL DIR PROGRAM...: runs DIR's test programs, $jobs at a time
# (default: the CPUs), each through $runner when set (qemu-aarch64 -L ...),
# in DIR with the environment as it is; then prints each one's output in
# the order given under "== PROGRAM (LABEL)". Exit status 77 is "skipped";
# returns 1 when any program failed.
run_programs() {
    label=$1 dir=$(cd "$2" && pwd); shift 2
    logs=$dir/test-logs
    rm -rf "$logs" && mkdir -p "$logs"
    printf '%s\n' "$@" | RUN_DIR=$dir RUN_LOGS=$logs RUN_WITH=${runner:-} \
        xargs -P "${jobs:-$(nproc 2>/dev/null || echo 2)}" -I{} sh -c \
        'cd "$RUN_DIR" && { $RUN_WITH "./$1" > "$RUN_LOGS/$1.log" 2>&1; echo $? > "$RUN_LOGS/$1.rc"; }' _ {}
    failed=0
    for p in "$@"; do
        echo "== $p ($label)"
        cat "$logs/$p.log" 2>/dev/null || true
        rc=$(cat "$logs/$p.rc" 2>/dev/null || echo "no status")
        if [ "$rc" = 77 ]; then echo "   skipped"; elif [ "$rc" != 0 ]; then echo "   FAILED ($rc)"; failed=1; fi
    done
    return $failed
}

# cli_serve_start LOG ARGS...: starts `moex serve --port 0 ARGS` in the
# background (stderr in LOG) and sets pid and port once it serves; exits the
# test (1) when it does not start.
cli_serve_start() {
    log=$1; shift
    "$MOEX_BIN" serve --port 0 "$@" 2> "$log" &
    pid=$!
    port=""
    for _ in $(seq 1 200); do
        port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$log" | head -n 1)
        [ -n "$port" ] && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "FAIL: moex serve did not start"; cat "$log"; kill "$pid" 2> /dev/null; exit 1; }
}
