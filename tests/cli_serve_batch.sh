#!/bin/sh
# moex serve --parallel 8 with the built-in model: 8 concurrent streaming
# clients all complete, each with the tokens moex run gives its prompt, seed
# and settings alone, and the server's generation rate (tokens per second of
# its decode passes' CPU time) with 8 clients is above 1.1x its rate with one:
# their decode steps share forward passes (tests/serve_batch_client.py).
set -u
command -v python3 > /dev/null || { echo "SKIP: no python3 for the HTTP client"; exit 77; }
if "$MOEX_BIN" serve --help | grep -q "without HTTP support"; then
    echo "SKIP: this moex was built without HTTP support (libmicrohttpd-dev, libcjson-dev)"
    exit 77
fi
tmp=${MOEX_TEST_TMP:-/tmp}/cli_serve_batch.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
exec python3 "$(dirname "$0")/serve_batch_client.py" "$MOEX_BIN" "$tmp"
