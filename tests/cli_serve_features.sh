#!/bin/sh
# moex serve's OpenAI fields (logprobs, n, logit_bias, penalties, echo,
# seeds), the fields it refuses by name, llama-server's endpoints, CORS,
# IPv6, the request log and /health (tests/serve_features.py).
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
cli_tmpdir cli_serve_features
cli_build_default_model
python3 -B "$(dirname "$0")/serve_features.py" "$MOEX_BIN" "$tmp"
