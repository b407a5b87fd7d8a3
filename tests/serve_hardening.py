"""Client side of tests/cli_serve_hardening.sh: the server defects found by
attacking it, each checked the way it was found. Loopback only; every wait is
bounded; the one time bound is the slow-client check's (a normal client
served within 1 s while 90 slow connections are open)."""
import http.client
import json
import socket
import sys
import threading
import time

import serve_start
from serve_start import raw_exchange

moex, tmp = sys.argv[1], sys.argv[2]
check = serve_start.check


def request(port, method, path, body=None, headers=None, raw=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


def openai_error(text):
    """The OpenAI error shape: {"error": {"message", "type", "param", "code"}}."""
    try:
        err = json.loads(text)["error"]
        return isinstance(err["message"], str) and isinstance(err["type"], str) and "param" in err and "code" in err
    except (ValueError, KeyError, TypeError):
        return False


def split_response(raw):
    """Status, head and body of one HTTP response (chunked bodies joined)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        body = out
    return status, head, body


def status_lines(raw):
    """How many status lines the bytes hold (a line that begins with HTTP/)."""
    return raw.startswith(b"HTTP/") + raw.count(b"\nHTTP/")


def post_bytes(path, payload, extra=b""):
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)


server, port = serve_start.start(moex, ["--parallel", "2", "--request-timeout", "3", "--max-connections", "8"])

# 3: a half-closed client is answered in full (its upload ended, nothing more).
body = {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
s, t = request(port, "POST", "/v1/completions", body)
want = json.loads(t)["choices"][0]["text"] if s == 200 else None
st, head, b = split_response(raw_exchange(port, post_bytes("/v1/completions", json.dumps(body).encode()), shut=True))
got = json.loads(b) if st == 200 else {}
check(st == 200 and got["choices"][0]["text"] == want and got["usage"]["completion_tokens"] == 8,
      "a half-closed client gets the whole completion (%d, %r)" % (st, b[:100]))
st, head, b = split_response(raw_exchange(port, post_bytes("/v1/completions", json.dumps(dict(body, stream=True)).encode()),
                                          shut=True))
text = "".join(json.loads(line[6:])["choices"][0]["text"] for line in b.decode().split("\n\n")
               if line.startswith("data: {") and json.loads(line[6:])["choices"])
check(st == 200 and b.rstrip().endswith(b"data: [DONE]") and text == want,
      "a half-closed streaming client gets every event and [DONE] (%r)" % b[-60:])

# 6: stop strings end the text at the earliest match, whatever their order.
gen = {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.9, "seed": 3}
s, t = request(port, "POST", "/v1/completions", gen)
full = json.loads(t)["choices"][0]["text"]
chars = []
for ch in full:
    if ch.strip() and ch not in chars:
        chars.append(ch)
if len(chars) >= 2:
    first, later = chars[0], chars[1]
    cut = full[:full.index(first)]
    s, t = request(port, "POST", "/v1/completions", dict(gen, stop=[later, first]))
    got = json.loads(t)["choices"][0] if s == 200 else {}
    check(got.get("text") == cut and got.get("finish_reason") == "stop",
          "stop [%r, %r]: cut at the earliest, %r (got %r)" % (later, first, cut, got.get("text")))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps(dict(gen, stop=[later, first], stream=True)),
              headers={"Content-Type": "application/json"})
    streamed = ""
    for line in c.getresponse().read().decode().split("\n\n"):
        if line.startswith("data: {"):
            ev = json.loads(line[6:])
            streamed += "".join(ch.get("text", "") for ch in ev["choices"])
    c.close()
    check(streamed == cut, "and streamed the same (%r)" % streamed)
else:
    check(False, "the generated text has two distinct characters: %r" % full)

# 9: NUL in text is refused, never cut.
for what, payload in [("message content", {"messages": [{"role": "user", "content": "a\u0000b"}], "max_tokens": 2}),
                      ("prompt", {"prompt": "Once\u0000 upon", "max_tokens": 2})]:
    path = "/v1/chat/completions" if "messages" in payload else "/v1/completions"
    s, t = request(port, "POST", path, payload)
    check(s == 400 and openai_error(t) and "NUL" in t, "NUL in the %s: 400 (%d %s)" % (what, s, t[:80]))
s, t = request(port, "POST", "/v1/completions", raw='{"prompt": "a\\\\u0000b", "max_tokens": 2}')
check(s == 200, "an escaped backslash before u0000 is text, not NUL: 200 (%d)" % s)

# 4: a body over --max-body sent with Content-Length: the client sees the 413
# (Python's client sends the whole body first, as Node's does).
for size in (3 << 19, 4 << 20, 64 << 20):
    try:
        s, t = request(port, "POST", "/v1/completions", raw=b"x" * size)
        ok = s == 413 and openai_error(t)
    except OSError as e:
        s, t, ok = "error", str(e), False
    check(ok, "a %d-byte body: 413 seen by the client (%s %s)" % (size, s, t[:60]))

# 13: every error a client can get is the OpenAI JSON shape, with one status line.
post = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
cases = [
    ("a head over the bound", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", 431),
    ("a request target of 10000 bytes", b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("HTTP/1.1 without Host", b"GET /health HTTP/1.1\r\n\r\n", 400),
    ("a Content-Length that is not a number", post + b"Content-Length: abc\r\n\r\n{}", 400),
    ("a Content-Length with a sign", post + b"Content-Length: +2\r\n\r\n{}", 400),
    ("two different Content-Length headers", post + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
    ("Content-Length and Transfer-Encoding", post + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 400),
    ("a malformed chunked body", post + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\nZZ\r\n0\r\n\r\n", 411),
    ("an unknown transfer coding", post + b"Transfer-Encoding: gzip\r\n\r\n", 501),
    ("a folded header line", b"GET /health HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
    ("a space in the request target", b"GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("Expect: something", b"GET /health HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417),
    ("a body over --max-body announced", post + b"Content-Length: 99999999999\r\n\r\n", 413),
]
for what, data, want_status in cases:
    raw = raw_exchange(port, data, shut=True)
    st, head, b = split_response(raw)
    named = b"conflicting" in b if "Content-Length headers" in what else True
    check(st == want_status and openai_error(b.decode(errors="replace")) and status_lines(raw) == 1
          and b"application/json" in head and named,
          "%s: %d in the OpenAI shape, one status line (%r)" % (what, want_status, raw[:50]))
s, t = request(port, "GET", "/health")
check(s == 200 and json.loads(t)["status"] == "ok", "/health: ok after all of it")

# 5: slow clients. 90 connections each send a header byte a second; a normal
# client is served within 1 s meanwhile; the slow ones get 408 at
# --request-timeout (3 s), in the OpenAI shape.
slow = []
for _ in range(90):
    sk = socket.create_connection(("127.0.0.1", port), timeout=30)
    slow.append(sk)
stop_slow = threading.Event()
answers = [b""] * len(slow)


def trickle():
    head = b"GET /health HTTP/1.1\r\nHost: x\r\n"
    for k in range(len(head)):
        if stop_slow.is_set():
            return
        for sk in slow:
            try:
                sk.send(head[k:k + 1])
            except OSError:
                pass
        stop_slow.wait(1.0)


t_slow = threading.Thread(target=trickle, daemon=True)
t_slow.start()
time.sleep(1.5)
t0 = time.monotonic()
s, t = request(port, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0},
               timeout=10)
served = time.monotonic() - t0
check(s == 200 and served < 1.0, "a normal client is served in %.2f s (< 1 s) while 90 slow ones are open" % served)
for i, sk in enumerate(slow):
    sk.settimeout(10)
    try:
        while True:
            chunk = sk.recv(65536)
            if not chunk:
                break
            answers[i] += chunk
    except OSError:
        pass
stop_slow.set()
for sk in slow:
    sk.close()
timed_out = sum(1 for a in answers if split_response(a)[0] == 408 and openai_error(split_response(a)[2].decode()))
check(timed_out == 90, "the 90 slow connections got 408 in the OpenAI shape (%d did)" % timed_out)

# 5: what cannot be served gets 503: --max-connections 8 requests held (their
# bodies not sent), the next is told so.
held = []
for _ in range(8):
    sk = socket.create_connection(("127.0.0.1", port), timeout=30)
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    held.append(sk)
time.sleep(0.3)
st, head, b = split_response(raw_exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
check(st == 503 and openai_error(b.decode()), "over --max-connections: 503 in the OpenAI shape (%d %r)" % (st, b[:80]))
for sk in held:
    sk.close()
for _ in range(100):  # the held ones end (closed) and the server serves again
    s, t = request(port, "GET", "/health")
    if s == 200:
        break
    time.sleep(0.05)
check(s == 200, "and serves again once they are gone")
rc = serve_start.stop(server)
check(rc == 0, "SIGTERM: exit 0")

# 8: SIGTERM while requests run: every stream ends with [DONE] or an error
# event, every other request gets a whole answer; then the process exits.
for round_ in range(2):
    server, port = serve_start.start(moex, ["--parallel", "2"])
    results = {}

    def streamer(k):
        try:
            payload = json.dumps({"prompt": "Once upon a time", "max_tokens": 2000, "stream": True}).encode()
            raw = raw_exchange(port, post_bytes("/v1/completions", payload))
            st, head, b = split_response(raw)
            events = [e for e in b.decode(errors="replace").split("\n\n") if e.startswith("data: ")]
            last = events[-1] if events else ""
            ended = last == "data: [DONE]" or (last.startswith("data: {") and openai_error(last[6:]))
            results[k] = ended and raw.endswith(b"0\r\n\r\n")
        except Exception as e:  # noqa: BLE001 - a failed client is a failed check below
            results[k] = "error: %s" % e

    def plain(k):
        try:
            payload = json.dumps({"prompt": "Once", "max_tokens": 2000}).encode()
            st, head, b = split_response(raw_exchange(port, post_bytes("/v1/completions", payload)))
            results[k] = (st == 200 and "choices" in json.loads(b)) or (st == 503 and openai_error(b.decode()))
        except Exception as e:  # noqa: BLE001
            results[k] = "error: %s" % e

    threads = [threading.Thread(target=streamer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=plain, args=(k,)) for k in range(3, 5)]
    for th in threads:
        th.start()
    time.sleep(0.5)
    rc = serve_start.stop(server)
    for th in threads:
        th.join(60)
    check(rc == 0 and all(results.get(k) is True for k in range(5)),
          "SIGTERM mid-run (round %d): every request ends whole or with an error event, exit %s (%r)"
          % (round_ + 1, rc, results))

print("cli_serve_hardening: %s" % ("all passed" if serve_start.failures == 0 else "%d failed" % serve_start.failures))
sys.exit(1 if serve_start.failures else 0)
