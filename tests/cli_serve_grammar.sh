#!/bin/sh
# Structured output and tool calls of moex serve over python3's http.client
# (tests/serve_struct_client.py) on the qwen3moe oracle model: json_schema
# replies valid on 12 seeds, a forced tool call's shape plain and streamed
# (one tool_calls delta, then the finish chunk), a GBNF grammar, and the
# refusals naming their field. tests/cli_serve_struct.sh does more through
# the official Node client where it is installed.
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
model=${MOEX_ORACLE:-}/models/qwen3moe-o1-Q8_0.gguf
[ -f "$model" ] || { echo "SKIP: no oracle model $model (set MOEX_ORACLE)"; exit 77; }
cli_tmpdir cli_serve_grammar
cli_clean_env
python3 -B "$(dirname "$0")/serve_struct_client.py" "$MOEX_BIN" "$model"
