#!/usr/bin/env bash
# moex serve next to llama-server on the same model, threads, slots, context
# per slot and requests: for each engine in turn, a server with PARALLEL
# slots, then for 1, 4 and 8 concurrent greedy completions
# (bench/serve_load.py, python3's http.client, loopback) a streamed round
# for the time to first token and a plain round for the aggregate generation
# rate (the server's own token counter over the round's wall time). It never
# builds or downloads anything: LLAMA_SERVER points at a llama-server built
# beside the project (unset: moex only).
#
#   [MODEL=/work/models/q30b-l8-q4km.gguf] [MOEX=build/moex] [LLAMA_SERVER=...]
#   [THREADS=2] [PARALLEL=8] [CTX=1024] [MAX_TOKENS=64] [PROMPT_WORDS=48]
#   [CLIENTS="1 4 8"] [LOG_DIR=dir] bash bench/serve.sh
#
# CTX is per slot: llama-server's -c is the total of its slots, PARALLEL x CTX.
set -euo pipefail

MODEL=${MODEL:-/work/models/q30b-l8-q4km.gguf}
MOEX=${MOEX:-build/moex}
THREADS=${THREADS:-2}
PARALLEL=${PARALLEL:-8}
CTX=${CTX:-1024}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT_WORDS=${PROMPT_WORDS:-48}
CLIENTS=${CLIENTS:-"1 4 8"}
LOG_DIR=${LOG_DIR:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$LOG_DIR"
[ -x "$MOEX" ] || { echo "serve.sh: no moex binary at $MOEX" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "serve.sh: no model at $MODEL" >&2; exit 2; }
[ -z "${LLAMA_SERVER:-}" ] || [ -x "$LLAMA_SERVER" ] || { echo "serve.sh: $LLAMA_SERVER is not an executable" >&2; exit 2; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Waits (bounded) until GET /health answers 200.
wait_ready() {
    local port=$1 pid=$2
    for _ in $(seq 1 1200); do
        kill -0 "$pid" 2> /dev/null || return 1
        python3 -c "import http.client, sys
c = http.client.HTTPConnection('127.0.0.1', $port, timeout=2)
try:
    c.request('GET', '/health'); sys.exit(0 if c.getresponse().status == 200 else 1)
except OSError:
    sys.exit(1)" && return 0
        sleep 0.5
    done
    return 1
}

run_engine() {
    local engine=$1 port pid
    port=$(free_port)
    case $engine in
    moex) "$MOEX" serve -m "$MODEL" -t "$THREADS" --ctx "$CTX" --parallel "$PARALLEL" --port "$port" \
              --max-tokens "$MAX_TOKENS" 2> "$LOG_DIR/moex.log" & ;;
    llama.cpp) "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -tb "$THREADS" -c $((CTX * PARALLEL)) -np "$PARALLEL" \
                   --metrics --host 127.0.0.1 --port "$port" > "$LOG_DIR/llama.log" 2>&1 & ;;
    esac
    pid=$!
    if ! wait_ready "$port" "$pid"; then
        echo "serve.sh: $engine did not come up (log in $LOG_DIR)" >&2
        kill "$pid" 2> /dev/null || true
        return 1
    fi
    local counter=moex_generated_tokens_total
    [ "$engine" = moex ] || counter=llamacpp:tokens_predicted_total
    python3 "$HERE/serve_load.py" "$port" "$CLIENTS" "$MAX_TOKENS" "$PROMPT_WORDS" "$engine" "$counter" |
        tee -a "$LOG_DIR/results.jsonl"
    kill -TERM "$pid"
    wait "$pid" 2> /dev/null || true
}

: > "$LOG_DIR/results.jsonl"
engines="moex"
[ -n "${LLAMA_SERVER:-}" ] && engines="$engines llama.cpp"
for e in $engines; do run_engine "$e"; done

echo
echo "$(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads, $PARALLEL slots of $CTX tokens, $MAX_TOKENS tokens" \
     "greedy, prompts of ~$PROMPT_WORDS words; load: $(uptime | sed 's/.*load average: //')"
echo
python3 - "$LOG_DIR/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| engine | clients | tokens | wall s | aggregate t/s | TTFT mean s | TTFT max s | non-200 |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %d | %d | %.2f | %.2f | %.3f | %.3f | %d |" % (r["engine"], r["clients"], r["tokens"], r["wall_s"],
                                                             r["aggregate_tps"], r["ttft_mean_s"], r["ttft_max_s"],
                                                             r["errors"]))
for r in rows:
    if r["errors"]:
        print("\n%s, %d clients: %d answers not 200: %s" % (r["engine"], r["clients"], r["errors"], r["error"]))
PY
