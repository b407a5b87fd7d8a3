"""Client side of tests/cli_serve_features.sh: the OpenAI fields moex serve
implements (logprobs, n, logit_bias, penalties, echo, seeds drawn and
echoed), the ones it refuses by name, the llama-server endpoints, CORS,
IPv6, the request log and /health. Loopback only; every wait is bounded."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time

import serve_start

moex, tmp = sys.argv[1], sys.argv[2]
check = serve_start.check


def request(port, method, path, body=None, headers=None, host="127.0.0.1"):
    c = http.client.HTTPConnection(host, port, timeout=120)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text, dict((k.lower(), v) for k, v in r.getheaders())


def post(port, path, body):
    s, t, _ = request(port, "POST", path, body)
    return s, (json.loads(t) if t.startswith("{") or t.startswith("[") else t)


def events(port, path, body):
    """The JSON events of a stream, until [DONE]."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    out = []
    for line in c.getresponse().read().decode().split("\n\n"):
        if line.startswith("data: {"):
            out.append(json.loads(line[6:]))
    c.close()
    return out


server, port = serve_start.start(moex, ["--parallel", "3", "--alias", "moex-test", "--cors", "http://example.com"])
check(any('as "moex-test"' in line for line in server.lines), "--alias is shown at start-up")

# Seeds: an unseeded request draws one and says which; giving it back repeats the text.
base = {"prompt": "Once upon a time", "max_tokens": 12}
_, a = post(port, "/v1/completions", base)
_, b = post(port, "/v1/completions", base)
check(a["seed"] != b["seed"] and a["choices"][0]["text"] != b["choices"][0]["text"],
      "unseeded requests draw different seeds and texts (%s, %s)" % (a["seed"], b["seed"]))
_, again = post(port, "/v1/completions", dict(base, seed=a["seed"]))
check(again["choices"][0]["text"] == a["choices"][0]["text"] and again["seed"] == a["seed"],
      "the seed a response names reproduces its text")
repeats = 0
for _ in range(20):  # seeds of 16 digits among them: each named in full, an integer
    _, u = post(port, "/v1/completions", dict(base, max_tokens=4))
    _, again = post(port, "/v1/completions", dict(base, max_tokens=4, seed=u["seed"]))
    repeats += isinstance(u["seed"], int) and again["choices"][0]["text"] == u["choices"][0]["text"]
check(repeats == 20, "20 drawn seeds each named as an integer in full and repeating their text (%d did)" % repeats)
check(a["id"] != b["id"] and abs(a["created"] - time.time()) < 60 and a["system_fingerprint"].startswith("moex-"),
      "ids differ, created is the request's time (%s, %s)" % (a["id"], a["created"]))

# logprobs, chat shape: each token, its logprob, its bytes, top_logprobs best first.
chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6, "temperature": 0}
s, r = post(port, "/v1/chat/completions", dict(chat, logprobs=True, top_logprobs=3))
content = r["choices"][0]["logprobs"]["content"] if s == 200 else []
ok = len(content) == r["usage"]["completion_tokens"] - (r["choices"][0]["finish_reason"] == "stop")
for e in content:
    tops = e["top_logprobs"]
    ok = ok and e["logprob"] <= 0 and isinstance(e["bytes"], list) and len(tops) == 3
    ok = ok and tops[0]["logprob"] >= tops[1]["logprob"] >= tops[2]["logprob"]
    ok = ok and abs(tops[0]["logprob"] - e["logprob"]) < 1e-6 and tops[0]["token"] == e["token"]  # greedy: the best
check(s == 200 and content and ok, "chat logprobs: token, logprob, bytes, 3 top_logprobs best first (%s)" %
      json.dumps(content[:1])[:160])
check("".join(e["token"] for e in content) == r["choices"][0]["message"]["content"],
      "the tokens spell the content")
ev = events(port, "/v1/chat/completions", dict(chat, logprobs=True, top_logprobs=2))
streamed = [e for x in ev for ch in x["choices"] if ch.get("logprobs") for e in ch["logprobs"]["content"]]
check([e["token"] for e in streamed] == [e["token"] for e in content], "streamed logprobs name the same tokens")

# logprobs, completions shape.
s, r = post(port, "/v1/completions", dict(base, temperature=0, logprobs=2))
lp = r["choices"][0]["logprobs"] if s == 200 else {}
check(s == 200 and len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"])
      and all(len(t) <= 2 for t in lp["top_logprobs"]) and lp["text_offset"][0] == 0
      and "".join(lp["tokens"]) == r["choices"][0]["text"], "completions logprobs: tokens, token_logprobs, top_logprobs, text_offset")

# n = 3: three choices from seeds seed, seed + 1, seed + 2, each as alone.
s, r = post(port, "/v1/completions", dict(base, n=3, seed=40))
texts = [c["text"] for c in r["choices"]] if s == 200 else []
check(len(set(texts)) == 3 and [c["index"] for c in r["choices"]] == [0, 1, 2], "n = 3: three distinct choices")
alone = [post(port, "/v1/completions", dict(base, seed=40 + i))[1]["choices"][0]["text"] for i in range(3)]
check(texts == alone, "choice i is what seed + i gives alone")


# n = 3 evaluates the prompt once: the other two choices copy its sequence
# (a new prompt no slot holds; the three slots are free).
m0 = serve_start.metrics(port)
s, r = post(port, "/v1/completions", {"prompt": "The three little pigs built their houses of straw, sticks and bricks",
                                      "max_tokens": 4, "n": 3, "seed": 7})
m1 = serve_start.metrics(port)
before = [m0["prompt_tokens_total"], m0["prompt_tokens_reused_total"]]
after = [m1["prompt_tokens_total"], m1["prompt_tokens_reused_total"]]
n_prompt = r["usage"]["prompt_tokens"] if s == 200 else 0
evaluated = (after[0] - before[0]) - (after[1] - before[1])
check(s == 200 and n_prompt > 5 and after[0] - before[0] == 3 * n_prompt and evaluated == n_prompt,
      "n = 3: the prompt of %d tokens evaluated once (%g evaluated, %g counted)" % (n_prompt, evaluated, after[0] - before[0]))
alone = [post(port, "/v1/completions", {"prompt": "The three little pigs built their houses of straw, sticks and bricks",
                                        "max_tokens": 4, "seed": 7 + i})[1]["choices"][0]["text"] for i in range(3)]
check(s == 200 and [c["text"] for c in r["choices"]] == alone, "a copied prompt's choices are what each seed gives alone")
ev = events(port, "/v1/chat/completions", {"messages": chat["messages"], "max_tokens": 6, "n": 3, "seed": 5})
by_index = {}
finished = set()
for x in ev:
    for ch in x["choices"]:
        by_index[ch["index"]] = by_index.get(ch["index"], "") + (ch["delta"].get("content") or "")
        if ch.get("finish_reason"):
            finished.add(ch["index"])
check(finished == {0, 1, 2} and len(set(by_index.values())) == 3, "n = 3 streamed: three choices, each finished")

# logit_bias: +100 forces a token, -100 bans one.
tok = json.loads(request(port, "POST", "/tokenize", {"content": " the"})[1])["tokens"]
check(len(tok) == 1, "/tokenize: ' the' is one token (%s)" % tok)
s, r = post(port, "/v1/completions", dict(base, temperature=0.8, seed=1, logit_bias={str(tok[0]): 100}, max_tokens=5))
check(s == 200 and r["choices"][0]["text"] == " the" * 5, "logit_bias +100 forces the token (%r)" % r)
_, greedy = post(port, "/v1/completions", dict(base, temperature=0, logprobs=0, max_tokens=1))
first = greedy["choices"][0]["logprobs"]["tokens"][0]
first_id = json.loads(request(port, "POST", "/tokenize", {"content": first, "parse_special": False})[1])["tokens"]
s, r = post(port, "/v1/completions", dict(base, temperature=0, logprobs=0, max_tokens=1,
                                           logit_bias={str(first_id[0]): -100}))
check(len(first_id) == 1 and s == 200 and r["choices"][0]["logprobs"]["tokens"][0] != first,
      "logit_bias -100 bans the greedy token %r" % first)
s, r = post(port, "/v1/completions", dict(base, logit_bias={"99999999": 1}))
check(s == 400 and r["error"]["param"] == "logit_bias", "logit_bias of an id out of range: 400")
# Penalties: " the" biased +100 and " and" +92 under greedy draws: " the" each
# time, until presence 2 and frequency 2 per draw bring it below " and".
other = json.loads(request(port, "POST", "/tokenize", {"content": " and"})[1])["tokens"]
bias = {str(tok[0]): 100, str(other[0]): 92}
_, unpen = post(port, "/v1/completions", dict(base, temperature=0, logit_bias=bias, max_tokens=12))
_, pen = post(port, "/v1/completions", dict(base, temperature=0, logit_bias=bias, max_tokens=12, presence_penalty=2,
                                            frequency_penalty=2))
check(len(other) == 1 and unpen["choices"][0]["text"] == " the" * 12 and " and" in pen["choices"][0]["text"]
      and pen["choices"][0]["text"].startswith(" the"),
      "presence and frequency penalties turn greedy draws away from a repeated token (%r)" % pen["choices"][0]["text"])
s, r = post(port, "/v1/completions", dict(base, presence_penalty=3))
check(s == 400 and r["error"]["param"] == "presence_penalty", "presence_penalty 3: 400")

# echo: the prompt before the text.
s, r = post(port, "/v1/completions", dict(base, seed=9, echo=True))
_, plain = post(port, "/v1/completions", dict(base, seed=9))
check(r["choices"][0]["text"] == "Once upon a time" + plain["choices"][0]["text"], "echo: the prompt, then the text")
ev = events(port, "/v1/completions", dict(base, seed=9, echo=True))
check("".join(ch["text"] for x in ev for ch in x["choices"]) == r["choices"][0]["text"], "echo streamed: the same")

# Fields refused by name; fields of the other endpoint refused; vendor fields ignored.
for field, value, path in [("suffix", "end", "/v1/completions"), ("audio", {"voice": "x"}, "/v1/chat/completions"),
                           ("functions", [], "/v1/chat/completions"), ("echo", True, "/v1/chat/completions"),
                           ("messages", [], "/v1/completions"), ("store", True, "/v1/chat/completions"),
                           ("reasoning_effort", "low", "/v1/chat/completions"), ("best_of", 3, "/v1/completions"),
                           ("modalities", ["audio"], "/v1/chat/completions"), ("prediction", {}, "/v1/chat/completions"),
                           ("reasoning_format", "x", "/v1/chat/completions")]:
    body = dict(chat) if "chat" in path else dict(base)
    body[field] = value
    s, r = post(port, path, body)
    check(s == 400 and r["error"]["param"] == field, "'%s': 400 naming it (%s)" % (field, r["error"]["message"] if s == 400 else s))
s, r = post(port, "/v1/chat/completions", dict(chat, user="alice", max_completion_tokens=3, some_vendor_field=1,
                                                 stream_options=None, store=False, service_tier="auto"))
check(s == 200 and r["usage"]["completion_tokens"] <= 3, "user, max_completion_tokens, unknown vendor fields: 200")
time.sleep(0.2)
check(any("POST /v1/chat/completions 200" in line and "user=alice" in line for line in server.lines),
      "the request log has method, path, status, tokens, ms and the user")

# Endpoints of llama-server.
s, t, _ = request(port, "POST", "/tokenize", {"content": "Once upon a time", "with_pieces": True})
pieces = json.loads(t)["tokens"]
s, t, _ = request(port, "POST", "/detokenize", {"tokens": [p["id"] for p in pieces]})
check(json.loads(t)["content"] == "Once upon a time" and "".join(p["piece"] for p in pieces) == "Once upon a time",
      "/tokenize with pieces and /detokenize round trip")
s, t, _ = request(port, "GET", "/props")
props = json.loads(t)
check(props["total_slots"] == 3 and props["default_generation_settings"]["n_ctx"] > 0 and props["model_alias"] == "moex-test",
      "/props: slots, n_ctx, alias")
s, t, _ = request(port, "GET", "/slots")
check(s == 200 and [x["id"] for x in json.loads(t)] == [0, 1, 2], "/slots: one entry per slot")
s, t, _ = request(port, "GET", "/v1/models/moex-test")
check(s == 200 and json.loads(t)["id"] == "moex-test", "/v1/models/{id}")
s, t, _ = request(port, "GET", "/v1/models/other")
check(s == 404 and json.loads(t)["error"]["code"] == "model_not_found", "/v1/models/{unknown}: 404 model_not_found")
s, t, h = request(port, "GET", "/")
check(s == 200 and "text/html" in h.get("content-type", "") and "<title>moex chat</title>" in t, "the chat page at /")

# /v1/embeddings: unit vectors, the same for the same text, base64 the same floats.
import base64
import math
import struct
s, r = post(port, "/v1/embeddings", {"input": ["hello world", "hello world", "other words"], "model": "x"})
vec = [d["embedding"] for d in r["data"]] if s == 200 else [[]]
check(s == 200 and len(vec) == 3 and abs(math.fsum(x * x for x in vec[0]) - 1) < 1e-4 and vec[0] == vec[1]
      and vec[0] != vec[2] and r["usage"]["prompt_tokens"] > 0, "/v1/embeddings: unit vectors, equal for equal text")
s, r = post(port, "/v1/embeddings", {"input": "hello world", "encoding_format": "base64"})
raw = base64.b64decode(r["data"][0]["embedding"]) if s == 200 else b""
check(list(struct.unpack("<%df" % (len(raw) // 4), raw)) == [struct.unpack("<f", struct.pack("<f", x))[0] for x in vec[0]],
      "/v1/embeddings base64: the same float32s")
s, r = post(port, "/v1/embeddings", {"input": "hi", "dimensions": 3})
check(s == 400 and r["error"]["param"] == "dimensions", "/v1/embeddings dimensions other than the model's: 400")

# CORS: the preflight and the allowed origin.
s, t, h = request(port, "OPTIONS", "/v1/chat/completions", headers={"Origin": "http://example.com",
                                                                  "Access-Control-Request-Method": "POST"})
check(s == 204 and h.get("access-control-allow-origin") == "http://example.com"
      and "POST" in h.get("access-control-allow-methods", "") and "Authorization" in h.get("access-control-allow-headers", ""),
      "CORS preflight: 204 with the allowed origin, methods and headers")
s, t, h = request(port, "GET", "/v1/models")
check(h.get("access-control-allow-origin") == "http://example.com", "CORS: the origin on answers")

# /health: busy while every slot is taken and requests wait.
socks = []
for _ in range(5):
    sk = socket.create_connection(("127.0.0.1", port), timeout=30)
    payload = json.dumps({"prompt": "Once upon a time", "max_tokens": 2048, "stream": True, "temperature": 1.5}).encode()
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
    socks.append(sk)
busy = None
for _ in range(100):
    s, t, _ = request(port, "GET", "/health")
    if json.loads(t)["status"] == "busy":
        busy = (s, json.loads(t))
        break
    time.sleep(0.02)
s2, t2, _ = request(port, "GET", "/health?fail_on_no_slot=1")
for sk in socks:
    sk.close()
check(busy is not None and busy[0] == 200 and busy[1]["slots_idle"] == 0 and busy[1]["queued"] > 0,
      "/health: busy (200) while every slot runs and requests wait (%r)" % (busy,))
check(s2 == 503 or json.loads(t2)["status"] == "ok", "/health?fail_on_no_slot: 503 when busy")
rc = serve_start.stop(server)
check(rc == 0, "SIGTERM: exit 0")

# Without --cors no CORS header; --quiet logs no request; IPv6.
server, port = serve_start.start(moex, ["--quiet"])
s, t, h = request(port, "GET", "/v1/models")
check(s == 200 and "access-control-allow-origin" not in h, "no --cors: no CORS header")
post(port, "/v1/completions", dict(base, max_tokens=2))
time.sleep(0.2)
check(not any("POST /v1/completions" in line for line in server.lines), "--quiet: no request log")
serve_start.stop(server)
try:
    socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    have_v6 = True
except OSError:
    have_v6 = False
if have_v6:
    server, port = serve_start.start(moex, ["--host", "::1"])
    s, t, _ = request(port, "GET", "/health", host="::1")
    check(s == 200 and any("http://[::1]:%d/v1" % port in line for line in server.lines), "--host ::1: IPv6")
    serve_start.stop(server)
else:
    print("SKIP (this check only): no IPv6 loopback here for --host ::1")

# Thinking: a tiny model whose template opens a <think> block (its tokenizer
# from tests/serve_think_vocab.py); "</think>" biased so that it comes.
vocab = os.path.join(tmp, "think-vocab.gguf")
think_model = os.path.join(tmp, "think.gguf")
subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_think_vocab.py"), vocab],
               check=True)
subprocess.run([moex, "synth", "--preset", "tiny", "--vocab-from", vocab, "-o", think_model, "-q"], check=True)
server, port = serve_start.start(moex, ["-m", think_model])
close_id = json.loads(request(port, "POST", "/tokenize", {"content": "</think>"})[1])["tokens"]
think = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 40, "seed": 3, "temperature": 1,
         "logit_bias": {str(close_id[0]): 4}}
s, r = post(port, "/v1/chat/completions", think)
msg = r["choices"][0]["message"] if s == 200 else {}
check(len(close_id) == 1 and msg.get("reasoning_content") and "</think>" not in msg["reasoning_content"],
      "reasoning_content: the think block's text (%r)" % msg.get("reasoning_content"))
_, inline = post(port, "/v1/chat/completions", dict(think, reasoning_format="none"))
raw = inline["choices"][0]["message"]["content"]
before, _, after = raw.partition("</think>")
check("reasoning_content" not in inline["choices"][0]["message"] and before.strip("\n") == msg["reasoning_content"]
      and after.lstrip(" \n") == msg["content"], "reasoning_format none: the block kept in content, as generated")
ev = events(port, "/v1/chat/completions", think)
s_r = "".join(ch["delta"].get("reasoning_content") or "" for x in ev for ch in x["choices"])
s_c = "".join(ch["delta"].get("content") or "" for x in ev for ch in x["choices"])
check(s_r == msg["reasoning_content"] and s_c == msg["content"], "streamed: reasoning_content deltas, then content")
_, off = post(port, "/v1/chat/completions", dict(think, chat_template_kwargs={"enable_thinking": False}))
check("reasoning_content" not in off["choices"][0]["message"] or not off["choices"][0]["message"]["reasoning_content"],
      "enable_thinking false: no reasoning")
serve_start.stop(server)
server, port = serve_start.start(moex, ["-m", think_model, "--reasoning-format", "none"])
_, flag = post(port, "/v1/chat/completions", think)
_, back = post(port, "/v1/chat/completions", dict(think, reasoning_format="deepseek"))
check(flag["choices"][0]["message"]["content"] == raw and back["choices"][0]["message"].get("reasoning_content") ==
      msg["reasoning_content"], "--reasoning-format none: inline by default; a request's deepseek splits again")
serve_start.stop(server)

# /health says "loading" while the model loads: a model path that is a FIFO
# holds the load in open() until a writer comes; then the load fails, and
# the server exits 1 saying why.
fifo = os.path.join(tmp, "model-fifo.gguf")
os.mkfifo(fifo)
proc = subprocess.Popen([moex, "serve", "--port", "0", "-m", fifo], stderr=subprocess.PIPE, text=True)
line = proc.stderr.readline()
m = re.search(r"listening on http://127\.0\.0\.1:(\d+), loading", line)
loading = m and request(int(m.group(1)), "GET", "/health")[:2]
refused = m and request(int(m.group(1)), "POST", "/v1/completions", base)[0]
with open(fifo, "w"):
    pass  # the writer comes and goes: the load goes on, and fails
try:
    rest = proc.communicate(timeout=60)[1]
except subprocess.TimeoutExpired:
    proc.kill()
    rest = "(killed)"
check(loading and loading[0] == 503 and json.loads(loading[1])["status"] == "loading" and refused == 503,
      "/health: loading (503) while the model loads, and completions 503 (%r, %r)" % (line, loading))
check(proc.returncode == 1 and "not a regular file" in rest, "a model that fails to load after listening: exit 1, why")

print("cli_serve_features: %s" % ("all passed" if serve_start.failures == 0 else "%d failed" % serve_start.failures))
sys.exit(1 if serve_start.failures else 0)
