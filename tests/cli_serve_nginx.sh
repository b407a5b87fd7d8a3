#!/bin/sh
# Two moex serve instances behind nginx with docs/serve-nginx.conf, streaming
# clients through it, one instance stopped mid-run: every request answered,
# none hung (tests/serve_nginx.py).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
command -v nginx > /dev/null || [ -x /usr/sbin/nginx ] || { echo "SKIP: no nginx (Debian's nginx package)"; exit 77; }
PATH="$PATH:/usr/sbin"
cli_tmpdir cli_serve_nginx
cli_build_default_model
python3 -B "$(dirname "$0")/serve_nginx.py" "$MOEX_BIN" "$tmp" "$MOEX_SRC/docs/serve-nginx.conf"
