"""Load for bench/serve.sh against an OpenAI-style server on 127.0.0.1:PORT:
for each concurrency level, two rounds of that many concurrent completions
(greedy, ignore_eos, a prompt of its own per client and round, so that no
server reuses a cached prompt):
  - streamed: time to first token = time to the first server-sent event
    (a token's text, or an error the server raised on producing it);
  - not streamed: the aggregate generation rate = tokens generated (the
    server's own counter COUNTER on /metrics) / wall time of the round.
One JSON line per level. Responses that were not 200 are counted as errors
(llama-server answers 500 "does not match the expected Content-only
format" when a random-weights model's text is not valid UTF-8; it has
generated the tokens by then, and its counter has them).

    python3 bench/serve_load.py PORT "1 4 8" MAX_TOKENS PROMPT_WORDS TAG COUNTER"""
import http.client
import json
import re
import sys
import threading
import time

port, levels, max_tokens, prompt_words, tag, counter = int(sys.argv[1]), sys.argv[2].split(), int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5], sys.argv[6]
WORDS = "the cat sat on a warm hill by the sea and watched ships go down the long road".split()


def prompt(level, i, kind):
    words = [WORDS[(level * 7 + i * 3 + k) % len(WORDS)] for k in range(prompt_words)]
    return "%s round %d, client %d: %s" % (kind, level, i, " ".join(words))


def generated():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(counter), text, re.M)
    return float(m.group(1)) if m else float("nan")


def body(level, i, kind, stream):
    b = {"prompt": prompt(level, i, kind), "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if stream:
        b["stream"] = True
    return json.dumps(b)


def streamed(level, i, out):
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/completions", body=body(level, i, "stream", True), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    first = None
    for raw in r:
        if raw.startswith(b"data: "):
            first = time.time()
            break
    c.close()  # the rest is not needed: hanging up ends the generation
    out[i] = (first or time.time()) - t0


def plain(level, i, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/completions", body=body(level, i, "plain", False), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    out[i] = (r.status, text[:200])


def round_of(fn, n):
    out = [None] * n
    threads = [threading.Thread(target=fn, args=(n, i, out)) for i in range(n)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, time.time() - t0


for level in levels:
    n = int(level)
    ttft, _ = round_of(streamed, n)
    time.sleep(1)  # the hung-up streams' slots come free
    before = generated()
    answers, wall = round_of(plain, n)
    tokens = generated() - before
    errors = [a[1] for a in answers if a[0] != 200]
    print(json.dumps({"engine": tag, "clients": n, "tokens": int(tokens), "wall_s": round(wall, 3),
                      "aggregate_tps": round(tokens / wall, 2), "ttft_mean_s": round(sum(ttft) / n, 3),
                      "ttft_max_s": round(max(ttft), 3), "errors": len(errors),
                      "error": errors[0] if errors else ""}), flush=True)
