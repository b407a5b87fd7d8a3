"""Client side of tests/cli_serve.sh: starts `moex serve`, checks it, stops it.
Loopback only; every wait is a bounded loop; no assertion on timing."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import serve_start

moex, tmp = sys.argv[1], sys.argv[2]
KEY = "test-key"
check = serve_start.check


server, port = serve_start.start(moex, ["--parallel", "2", "--api-key", KEY, "--max-body", "4096",
                                         "--max-prompt-tokens", "600", "--max-headers", "32"])


def request(method, path, body=None, headers=None, key=KEY, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


def stream(path, body):
    """The text of a streamed completion, its finish reason, and whether [DONE] ended it."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    text, finish, done, usage = "", None, False, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev["choices"]:
            piece = ch["delta"].get("content", "") if "delta" in ch else ch.get("text", "")
            text += piece or ""
            finish = ch.get("finish_reason") or finish
    c.close()
    return text, finish, done, usage


def moex_run(prompt, n, extra):
    """moex run's text after the prompt, and how many ids it printed."""
    text = serve_start.moex_run_text(moex, tmp, prompt, n, extra)
    ids = subprocess.run([moex, "run", "-f", os.path.join(tmp, "prompt.txt"), "-n", str(n), "--print-ids"] + extra,
                         capture_output=True).stdout.decode().split()
    return text, len(ids)


def error_of(status, text, want):
    try:
        err = json.loads(text)["error"]
        shaped = isinstance(err["message"], str) and "type" in err and "code" in err and "param" in err
    except (ValueError, KeyError, TypeError):
        shaped = False
    return status == want and shaped


# Chat: non-streaming and streaming equal moex run on the template's text.
chat_prompt = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
want, n_ids = moex_run(chat_prompt, 16, ["--seed", "7"])
body = {"model": "x", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "seed": 7}
status, text = request("POST", "/v1/chat/completions", body)
resp = json.loads(text) if status == 200 else {}
got = resp.get("choices", [{}])[0].get("message", {}).get("content")
check(status == 200 and got == want, "chat completion equals moex run --seed 7 (%r)" % want[:40])
usage = resp.get("usage", {})
finish = resp.get("choices", [{}])[0].get("finish_reason")
eog = 1 if finish == "stop" else 0
check(usage.get("prompt_tokens", 0) > 0 and usage.get("completion_tokens") == n_ids - eog
      and finish in ("stop", "length"), "usage and finish_reason (%s, %s)" % (usage, finish))
s_text, s_finish, s_done, s_usage = stream("/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
check(s_text == want and s_finish == finish and s_done, "streamed chat equals it, then [DONE]")
check(s_usage is not None and s_usage["completion_tokens"] == usage.get("completion_tokens"), "streamed usage")

# Text completion, sampling settings given.
settings = {"temperature": 0.5, "top_k": 20, "top_p": 0.9, "min_p": 0.1, "seed": 11}
want_c, _ = moex_run("Once upon a time", 12,
                     ["--temp", "0.5", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.1", "--seed", "11"])
status, text = request("POST", "/v1/completions", dict(settings, prompt="Once upon a time", max_tokens=12))
got = json.loads(text)["choices"][0]["text"] if status == 200 else None
check(got == want_c, "completion with temperature, top_k, top_p, min_p, seed equals moex run")
c_text, _, c_done, _ = stream("/v1/completions", dict(settings, prompt="Once upon a time", max_tokens=12))
check(c_text == want_c and c_done, "streamed completion equals it")
words = want_c.split()
if len(words) >= 3:
    stop = " " + words[2]
    status, text = request("POST", "/v1/completions", dict(settings, prompt="Once upon a time", max_tokens=12,
                                                           stop=[stop]))
    r = json.loads(text)["choices"][0] if status == 200 else {}
    check(r.get("text") == want_c[:want_c.find(stop)] and r.get("finish_reason") == "stop",
          "stop %r cuts the text before it, finish_reason stop" % stop)
    st, fin, _, _ = stream("/v1/completions", dict(settings, prompt="Once upon a time", max_tokens=12, stop=stop))
    check(st == want_c[:want_c.find(stop)] and fin == "stop", "streamed, the stop string is held back and cut")

# A prompt of some hundred tokens (in one piece while no other slot decodes;
# cli_serve_batch has one in pieces between another's decode steps).
long_prompt = " ".join("the %s of %d" % (w, i) for i, w in enumerate(["cat", "sea", "hill", "road"] * 20))
want_l, _ = moex_run(long_prompt, 8, ["--temp", "0"])
status, text = request("POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "temperature": 0})
r = json.loads(text) if status == 200 else {}
n_long = r.get("usage", {}).get("prompt_tokens", 0)
check(n_long > 256 and r["choices"][0]["text"] == want_l,
      "a %d-token prompt gives moex run's tokens" % n_long)

# 8 concurrent streaming clients on 2 slots: all complete, each as alone.
want_g, _ = moex_run(chat_prompt, 24, ["--temp", "0"])
results = [None] * 8


def client(i):
    try:
        results[i] = stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello"}],
                                                     "max_tokens": 24, "temperature": 0})
    except Exception as e:  # noqa: BLE001 - a failed client is a failed check below
        results[i] = ("error: %s" % e, None, False, None)


threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join(300)
bad = [r for r in results if not (r and r[2])]
check(not bad, "8 concurrent streams all end with [DONE]%s" % (": %r" % (bad[0],) if bad else ""))
check(all(r and r[0] == want_g for r in results), "and each equals moex run --temp 0")


def metric(name):
    _, text = request("GET", "/metrics")
    m = re.search(r"^moex_%s (\S+)$" % name, text, re.M)
    return float(m.group(1)) if m else None


# A client that hangs up mid-stream frees its slot.
cancelled = metric("requests_cancelled_total")
sock = socket.create_connection(("127.0.0.1", port))
payload = json.dumps({"prompt": "Once upon a time", "max_tokens": 2000, "stream": True})
sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json"
              "\r\nContent-Length: %d\r\n\r\n%s" % (KEY, len(payload), payload)).encode())
first = sock.recv(4096)
sock.close()
freed = False
for _ in range(200):
    if metric("requests_cancelled_total") == cancelled + 1 and metric("slots_busy") == 0:
        freed = True
        break
    time.sleep(0.05)
check(first.startswith(b"HTTP/1.1 200") and freed, "a client that hangs up frees its slot (cancelled, no slot busy)")
check(metric("generated_tokens_total") is not None and metric("expert_rows_cpu_total") > 0,
      "/metrics has token and executor counters")

# Bounds and errors: status and an OpenAI error body each.
chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}
s, t = request("POST", "/v1/chat/completions", raw=json.dumps(dict(chat, pad="x" * 5000)))
check(error_of(s, t, 413), "a body over --max-body: 413")
s, t = request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 700}]})
check(error_of(s, t, 400) and "context_length_exceeded" in t, "a prompt over --max-prompt-tokens: 400")
s, t = request("POST", "/v1/chat/completions", raw='{"messages": [')
check(error_of(s, t, 400), "malformed JSON: 400")
s, t = request("POST", "/v1/chat/completions", {"messages": "hi"})
check(error_of(s, t, 400) and "messages" in t, "messages not an array: 400")
s, t = request("POST", "/v1/chat/completions", dict(chat, max_tokens=100000))
check(error_of(s, t, 400) and "max_tokens" in t, "max_tokens over --max-tokens: 400")
s, t = request("POST", "/v1/chat/completions", dict(chat, n=17))
check(error_of(s, t, 400) and "'n'" in t, "n = 17 (over 16): 400")
s, t = request("POST", "/v1/chat/completions", dict(chat, temperature="hot"))
check(error_of(s, t, 400) and "temperature" in t, "a temperature that is not a number: 400")
s, t = request("POST", "/v1/chat/completions", dict(chat, seed=-1))
check(error_of(s, t, 400) and "from 0 to 9007199254740991" in t, "a negative seed: 400, the bound in full (%s)" % t[:120])
s, t = request("GET", "/v1/nothing")
check(error_of(s, t, 404), "unknown route: 404")
s, t = request("GET", "/v1/chat/completions")
check(error_of(s, t, 405), "GET on a POST route: 405")
s, t = request("POST", "/health", chat)
check(error_of(s, t, 405), "POST on a GET route: 405")
s, t = request("POST", "/v1/chat/completions", chat, key=None)
check(error_of(s, t, 401), "no API key: 401")
s, t = request("POST", "/v1/chat/completions", chat, key="wrong")
check(error_of(s, t, 401), "a wrong API key: 401")
s, t = request("GET", "/v1/models", key="wrong")
check(error_of(s, t, 401), "a wrong API key on /v1/models: 401")
s, t = request("GET", "/v1/models", headers={"X-Pad-%d" % i: "1" for i in range(40)})
check(error_of(s, t, 431), "more headers than --max-headers: 431")
s, t = request("GET", "/v1/models", headers={"X-Big": "a" * 9000})
check(error_of(s, t, 431), "headers over --max-header-bytes (8192): 431")
s, t = request("GET", "/v1/models")
check(s == 200 and json.loads(t)["data"][0]["object"] == "model", "/v1/models lists the model")

# Content as an array of text parts (what OpenAI clients may send) is their
# text joined; other parts, roles and stop values are refused by name.
parts = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]
s, t = request("POST", "/v1/chat/completions", dict(body, messages=[{"role": "user", "content": parts}]))
got = json.loads(t)["choices"][0]["message"]["content"] if s == 200 else None
check(got == want, "content as text parts equals the string's completion (%r)" % (got or t)[:60])
s, t = request("POST", "/v1/chat/completions",
               dict(chat, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]))
check(error_of(s, t, 400) and "only text content parts" in t, "an image part: 400 (%s)" % t[:80])
s, t = request("POST", "/v1/chat/completions", dict(chat, messages=[{"role": "wizard", "content": "hi"}]))
check(error_of(s, t, 400) and "'role' must be" in t, "an unknown role: 400 (%s)" % t[:80])
s, t = request("POST", "/v1/chat/completions", dict(chat, stop=5))
check(error_of(s, t, 400) and "'stop' must be" in t, "a stop that is a number: 400 (%s)" % t[:80])

# A second server on the port in use says so and exits 1.
second = subprocess.run([moex, "serve", "--port", str(port)], capture_output=True, text=True, timeout=300)
check(second.returncode == 1 and ("cannot listen on 127.0.0.1:%d" % port) in second.stderr,
      "a second server on the same port: exit %d, %r" % (second.returncode, second.stderr.strip()[-120:]))

# Malformed requests below HTTP's level and JSON's: an answer or a closed
# connection each, never a stuck or dead server.
auth = b"Authorization: Bearer " + KEY.encode() + b"\r\n"
post = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + auth
raw_cases = [
    ("garbage bytes", b"\x00\x01\x02 garbage\r\n\r\n", None),
    ("a request line without a version", b"GET /health\r\n\r\n", b"HTTP/1.1 400"),
    ("a header line without a colon", b"GET /health HTTP/1.1\r\nHost: x\r\nnot a header\r\n\r\n", b"HTTP/1.1 400"),
    ("a negative Content-Length", post + b"Content-Length: -5\r\n\r\n{}", b"HTTP/1.1 400"),
    ("a Content-Length shorter than the body", post + b"Content-Length: 5\r\n\r\n{\"prompt\": \"x\"}", b"HTTP/1.1 400"),
    ("a malformed chunked body (chunked bodies are refused)",
     post + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\nZZ\r\n0\r\n\r\n", b"HTTP/1.1 411"),
    ("JSON nested 2000 deep", post + b"Content-Length: 4000\r\n\r\n" + b"[" * 2000 + b"]" * 2000, b"HTTP/1.1 400"),
    ("a request cut off mid-body", post.replace(b"Connection: close\r\n", b"") + b"Content-Length: 100\r\n\r\n{\"pro", None),
]
for what, data, want in raw_cases:
    got = serve_start.raw_exchange(port, data, read=want is not None)
    check(want is None or got.startswith(want), "%s: %s" % (what, got[:40]))

s, t = request("GET", "/health", key=None)
check(s == 200 and json.loads(t).get("status") == "ok", "/health still answers, without a key")
rc = serve_start.stop(server)
check(rc == 0, "SIGTERM stops the server, exit 0")
print("cli_serve: %s" % ("all passed" if serve_start.failures == 0 else "%d failed" % serve_start.failures))
sys.exit(1 if serve_start.failures else 0)
