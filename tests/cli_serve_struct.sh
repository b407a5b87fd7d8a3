#!/bin/sh
# Structured output and tool calls of moex serve, through the official OpenAI
# Node client (tests/node/serve_struct.mjs, its packages pinned in
# tests/node/package.json, installed by `npm ci` there): on the oracle model
# of each architecture, json_schema replies over 50 seeds validated by ajv,
# json_object and GBNF replies, a forced tool call parsed by the client's
# helper and answered in a second turn, a streamed one, parallel calls, and
# the refusals (400 naming the field).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
node_dir="$MOEX_SRC/tests/node"
command -v node > /dev/null || { echo "SKIP: no node for the OpenAI client"; exit 77; }
for p in openai ajv; do
    [ -d "$node_dir/node_modules/$p" ] || { echo "SKIP: $p is not installed (cd tests/node && npm ci)"; exit 77; }
done
oracle=${MOEX_ORACLE:-}
models="$oracle/models/qwen3moe-o1-Q8_0.gguf $oracle/lfm2moe-o2/models/lfm2moe-o2-Q8_0.gguf $oracle/qwen35moe-o3/models/qwen35moe-o3-Q8_0.gguf"
for m in $models; do
    [ -f "$m" ] || { echo "SKIP: no oracle model $m (set MOEX_ORACLE)"; exit 77; }
done
cli_tmpdir cli_serve_struct
cli_clean_env
# shellcheck disable=SC2086
node "$node_dir/serve_struct.mjs" "$MOEX_BIN" $models
