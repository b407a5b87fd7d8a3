"""Client side of tests/cli_serve_batch.sh. Loopback only; every wait is a
bounded loop. The rate check compares the server's generation rate (generated
tokens per second of the decode passes' CPU time, from /metrics) with 8 clients
and with one."""
import http.client
import json
import os
import subprocess
import sys
import threading
import time

import serve_start

moex, tmp = sys.argv[1], sys.argv[2]
N_CLIENTS, MAX_TOKENS = 8, 48
check = serve_start.check


# One worker thread: the rate check below reads the CPU time of the thread
# that runs the passes, which then holds all of their compute.
server, port = serve_start.start(moex, ["--parallel", str(N_CLIENTS), "-t", "1"])


def stream(body):
    """The streamed text and whether [DONE] ended it."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text, done = "", False
    for raw in r:
        line = raw.decode().strip()
        if line == "data: [DONE]":
            done = True
            break
        if line.startswith("data: "):
            for ch in json.loads(line[6:])["choices"]:
                text += ch.get("text") or ""
    c.close()
    return text, done


def request_of(i):
    return {"prompt": "Story %d: once upon a time there was a %s" % (i, ["cat", "ship", "hill", "road"][i % 4]),
            "max_tokens": MAX_TOKENS, "temperature": 0.8, "seed": 1000 + i}


def moex_run_text(prompt, n, extra):
    return serve_start.moex_run_text(moex, tmp, prompt, n, extra)


def moex_run(i):
    r = request_of(i)
    return moex_run_text(r["prompt"], MAX_TOKENS, ["--temp", "0.8", "--seed", str(r["seed"])])


def decode_rate(before, after):
    """Generated tokens per second of the passes' CPU time over a round."""
    tokens = after["generated_tokens_total"] - before["generated_tokens_total"]
    seconds = after["generation_cpu_seconds_total"] - before["generation_cpu_seconds_total"]
    return tokens / seconds if seconds > 0 else 0.0, tokens


want = [moex_run(i) for i in range(N_CLIENTS)]

results = [None] * N_CLIENTS


def client(i):
    try:
        results[i] = stream(request_of(i))
    except Exception as e:  # noqa: BLE001 - a failed client is a failed check below
        results[i] = ("error: %s" % e, False)


def alone():
    """One client alone: its server decode rate and tokens, and its text."""
    before = serve_start.metrics(port)
    t0 = time.time()
    text, done = stream(request_of(0))
    after = serve_start.metrics(port)
    rate, tokens = decode_rate(before, after)
    print("alone: %d tokens in %.3f s of decode, %d passes, %.3f s of wall time" % (
        tokens, after["generation_seconds_total"] - before["generation_seconds_total"],
        after["batches_total"] - before["batches_total"], time.time() - t0))
    return rate, tokens, text, done


def together():
    """N_CLIENTS at once: the server's decode rate and tokens, and the metrics after."""
    before = serve_start.metrics(port)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(N_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    after = serve_start.metrics(port)
    rate, tokens = decode_rate(before, after)
    return rate, tokens, before, after


# The rate is per second of the decode passes' CPU time, so that other work
# on a shared machine does not count; still, one client alone and
# eight together in turn, up to 6 times, until the best rate of eight is above
# 1.1x the best of one. (Small model, one thread, quiet machine: ~0.25 ms
# of CPU a pass of one token, ~1.5 ms of eight: about 1.3x.)
stream(request_of(0))  # warms the pages
singles, aggregates = [], []
for attempt in range(6):
    if singles and max(aggregates) > 1.1 * max(singles):
        break
    rate, single_tokens, alone_text, alone_done = alone()
    singles.append(rate)
    check(alone_done and alone_text == want[0], "one client: moex run's text (%r)" % want[0][:30])
    rate, tokens, m1, m2 = together()
    aggregates.append(rate)
    check(all(r and r[1] for r in results), "%d concurrent streams all end with [DONE]" % N_CLIENTS)
    for i in range(N_CLIENTS):
        check(results[i] and results[i][0] == want[i], "client %d (seed %d) has moex run's text while the others run"
              % (i, 1000 + i))
    passes = m2["batches_total"] - m1["batches_total"]
    decode_rows = m2["batch_decode_tokens_total"] - m1["batch_decode_tokens_total"]
    print("single: %.1f tok/s of decode CPU time (%d tokens); %d clients: %.1f tok/s (%d tokens), %d passes, %.2f decode "
          "tokens per pass" % (singles[-1], single_tokens, N_CLIENTS, rate, tokens, passes, decode_rows / max(passes, 1)))
    check(decode_rows / max(passes, 1) > 4, "decode steps are batched: more than 4 decode tokens per pass on average")
single, aggregate = max(singles), max(aggregates)
check(aggregate > 1.1 * single, "aggregate rate %.1f tok/s of CPU time is above 1.1x one client's %.1f" % (aggregate, single))
m = serve_start.metrics(port)
check(m["batch_tokens_count"] == m["batches_total"] and m['batch_tokens_bucket{le="+Inf"}'] == m["batches_total"],
      "the batch histogram counts every pass")

# A long prompt while another slot decodes goes in pieces of 128 tokens, each
# in one pass with the other's decode token (129 tokens: passes over 128 can
# only be such, with one other slot): moex run's tokens all the same.
long_prompt = " ".join("the %s of %d" % (w, i) for i, w in enumerate(["cat", "sea", "hill", "road"] * 20))
want_long = moex_run_text(long_prompt, 8, ["--temp", "0"])
other_req = dict(request_of(1), max_tokens=200)
want_other = moex_run_text(other_req["prompt"], 200, ["--temp", "0.8", "--seed", str(other_req["seed"])])
other_result = []
other = threading.Thread(target=lambda: other_result.append(stream(other_req)))
before = serve_start.metrics(port)
other.start()
for _ in range(400):  # bounded: until the other request decodes
    if serve_start.metrics(port)["generated_tokens_total"] > before["generated_tokens_total"]:
        break
    time.sleep(0.01)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
c.request("POST", "/v1/completions", body=json.dumps({"prompt": long_prompt, "max_tokens": 8, "temperature": 0}),
          headers={"Content-Type": "application/json"})
answer = json.loads(c.getresponse().read().decode())
c.close()
other.join(300)
after = serve_start.metrics(port)
n_long = answer["usage"]["prompt_tokens"]


def over_128(m):
    return m["batch_tokens_count"] - m['batch_tokens_bucket{le="128"}']


check(n_long > 384 and answer["choices"][0]["text"] == want_long and other_result and other_result[0][0] == want_other,
      "a %d-token prompt prefilled beside another client's decode steps: both have moex run's text" % n_long)
check(over_128(after) - over_128(before) >= n_long // 128,
      "its pieces of 128 went in passes with the other's decode token (%d such passes)"
      % (over_128(after) - over_128(before)))

c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/health")
check(c.getresponse().status == 200, "/health still answers")
c.close()
rc = serve_start.stop(server)
check(rc == 0, "SIGTERM stops the server, exit 0")
print("cli_serve_batch: %s" % ("all passed" if serve_start.failures == 0 else "%d failed" % serve_start.failures))
sys.exit(1 if serve_start.failures else 0)
