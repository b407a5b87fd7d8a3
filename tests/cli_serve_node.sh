#!/bin/sh
# The official OpenAI Node client (tests/node, `npm ci` there) against moex
# serve: logprobs shapes, n = 3, streamed usage, echo, seeds, reasoning_content
# streamed, 413 for big bodies, refused fields as the client's BadRequestError
# (tests/node/openai_conformance.mjs).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
node_dir="$MOEX_SRC/tests/node"
command -v node > /dev/null || { echo "SKIP: no node for the OpenAI client"; exit 77; }
[ -d "$node_dir/node_modules/openai" ] || { echo "SKIP: no tests/node/node_modules (run npm ci in tests/node)"; exit 77; }
cli_tmpdir cli_serve_node
cli_build_default_model
# A tiny model that thinks, for reasoning_content.
python3 "$MOEX_SRC/tests/serve_think_vocab.py" "$tmp/vocab.gguf" || exit 1
"$MOEX_BIN" synth --preset tiny --vocab-from "$tmp/vocab.gguf" -o "$tmp/think.gguf" -q > /dev/null 2>&1 || exit 1
cli_serve_start "$tmp/serve.log" --api-key test-key --quiet --parallel 3
pid_a=$pid port_a=$port
cli_serve_start "$tmp/think.log" --api-key test-key --quiet -m "$tmp/think.gguf"
pid_b=$pid port_b=$port
node "$node_dir/openai_conformance.mjs" "http://127.0.0.1:$port_a/v1" "http://127.0.0.1:$port_b/v1"
rc=$?
for p in $pid_a $pid_b; do
    kill -TERM "$p"
    wait "$p" || { echo "FAIL: moex serve exited non-zero"; rc=1; }
done
exit $rc
