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
cli_serve_start "$tmp/serve.log" --quiet
rm -rf "$tmp/chromium-profile"
node "$node_dir/chat_page.mjs" "http://127.0.0.1:$port/" "${MOEX_TEST_TMP:-/tmp}/cli_serve_page.png" "$tmp/chromium-profile"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
[ "$src" -eq 0 ] || { echo "FAIL: moex serve exited $src"; rc=1; }
exit $rc
