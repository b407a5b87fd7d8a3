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
