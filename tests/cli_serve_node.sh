#!/bin/sh
# The official OpenAI Node client (tests/node, `npm ci` there) against moex
# serve: logprobs shapes, n = 3, streamed usage, echo, seeds, refused
# fields as the client's BadRequestError (tests/node/openai_conformance.mjs).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
node_dir="$MOEX_SRC/tests/node"
command -v node > /dev/null || { echo "SKIP: no node for the OpenAI client"; exit 77; }
[ -d "$node_dir/node_modules/openai" ] || { echo "SKIP: no tests/node/node_modules (run npm ci in tests/node)"; exit 77; }
cli_tmpdir cli_serve_node
cli_build_default_model
"$MOEX_BIN" serve --port 0 --parallel 3 --api-key test-key --quiet 2> "$tmp/serve.log" &
pid=$!
port=""
for _ in $(seq 1 200); do
    port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$tmp/serve.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: moex serve did not start"; cat "$tmp/serve.log"; kill "$pid" 2> /dev/null; exit 1; }
node "$node_dir/openai_conformance.mjs" "http://127.0.0.1:$port/v1"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
[ "$src" -eq 0 ] || { echo "FAIL: moex serve exited $src"; rc=1; }
exit $rc
