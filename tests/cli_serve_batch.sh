#!/bin/sh
# moex serve --parallel 8 with the built-in model: 8 concurrent streaming
# clients all complete, each with the tokens moex run gives its prompt, seed
# and settings alone, and the server's generation rate (tokens per second of
# its decode passes' CPU time) with 8 clients is above 1.1x its rate with one:
# their decode steps share forward passes (tests/serve_batch_client.py).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
cli_tmpdir cli_serve_batch
cli_build_default_model
python3 -B "$(dirname "$0")/serve_batch_client.py" "$MOEX_BIN" "$tmp"
