#!/bin/sh
# moex serve on a free loopback port with the built-in model, driven by
# python3's http.client (tests/serve_client.py): completions equal moex run's
# with the same seed and settings, streamed and not; 8 concurrent streams;
# a client that hangs up frees its slot; every bound and error answers with
# its status and an OpenAI error body; /health still answers after all of it.
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
cli_tmpdir cli_serve
cli_build_default_model
python3 -B "$(dirname "$0")/serve_client.py" "$MOEX_BIN" "$tmp"
