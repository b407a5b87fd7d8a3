#!/bin/sh
# moex serve on a free loopback port with the built-in model, driven by
# python3's http.client (tests/serve_client.py): completions equal moex run's
# with the same seed and settings, streamed and not; 8 concurrent streams;
# a client that hangs up frees its slot; every bound and error answers with
# its status and an OpenAI error body; /health still answers after all of it.
set -u
command -v python3 > /dev/null || { echo "SKIP: no python3 for the HTTP client"; exit 77; }
if "$MOEX_BIN" serve --help | grep -q "without HTTP support"; then
    echo "SKIP: this moex was built without HTTP support (libmicrohttpd-dev, libcjson-dev)"
    exit 77
fi
tmp=${MOEX_TEST_TMP:-/tmp}/cli_serve.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
exec python3 "$(dirname "$0")/serve_client.py" "$MOEX_BIN" "$tmp"
