#!/bin/sh
# moex serve against the defects found by attacking it (tests/serve_hardening.py):
# a half-closed client answered in full, 413 seen by a client sending a big
# body, slow clients that cannot starve a normal one (408 and 503 in the
# OpenAI shape), stop strings by earliest match, NUL refused, every error of
# the HTTP layer in the OpenAI shape, and SIGTERM ending every open request.
set -u
. "$(dirname "$0")/shell_lib.sh"
cli_serve_needs
cli_tmpdir cli_serve_hardening
cli_build_default_model
python3 -B "$(dirname "$0")/serve_hardening.py" "$MOEX_BIN" "$tmp"
