#!/bin/sh
# The chat page at / in headless Chromium, driven by playwright-core
# (tests/node/chat_page.mjs): a streamed reply, tokens/s, the stop button.
# The screenshot is kept: $MOEX_TEST_TMP/cli_serve_page.png.
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
node_dir="$MOEX_SRC/tests/node"
command -v node > /dev/null || { echo "SKIP: no node for the OpenAI client"; exit 77; }
[ -d "$node_dir/node_modules/playwright-core" ] || { echo "SKIP: no tests/node/node_modules (run npm ci in tests/node)"; exit 77; }
[ -x /usr/bin/chromium ] || { echo "SKIP: no /usr/bin/chromium (Debian's chromium package)"; exit 77; }
cli_tmpdir cli_serve_page
cli_build_default_model
"$MOEX_BIN" serve --port 0 --quiet 2> "$tmp/serve.log" &
pid=$!
port=""
for _ in $(seq 1 200); do
    port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/v1.*|\1|p' "$tmp/serve.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: moex serve did not start"; cat "$tmp/serve.log"; kill "$pid" 2> /dev/null; exit 1; }
rm -rf "$tmp/chromium-profile"
node "$node_dir/chat_page.mjs" "http://127.0.0.1:$port/" "${MOEX_TEST_TMP:-/tmp}/cli_serve_page.png" "$tmp/chromium-profile"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
[ "$src" -eq 0 ] || { echo "FAIL: moex serve exited $src"; rc=1; }
exit $rc
