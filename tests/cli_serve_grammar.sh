#!/bin/sh
# Structured output and tool calls of moex serve over python3's http.client
# (tests/serve_struct_client.py) on the qwen3moe oracle model: json_schema
# replies valid on 12 seeds, a forced tool call's shape plain and streamed
# (one tool_calls delta, then the finish chunk), a GBNF grammar, and the
# refusals naming their field; then LFM2's call format (the lfm2moe oracle
# model given a template with LFM2's tool-list markers): parallel calls in
# one list, plain and streamed. tests/cli_serve_struct.sh does more through
# the official Node client where it is installed.
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
model=${MOEX_ORACLE:-}/models/qwen3moe-o1-Q8_0.gguf
lfm2=${MOEX_ORACLE:-}/lfm2moe-o2/models/lfm2moe-o2-Q8_0.gguf
for m in "$model" "$lfm2"; do
    [ -f "$m" ] || { echo "SKIP: no oracle model $m (set MOEX_ORACLE)"; exit 77; }
done
cli_tmpdir cli_serve_grammar
cli_clean_env
python3 -B "$(dirname "$0")/serve_struct_client.py" "$MOEX_BIN" "$model" "$lfm2" "$tmp"
