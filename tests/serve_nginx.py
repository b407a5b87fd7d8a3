"""Client side of tests/cli_serve_nginx.sh: two moex serve instances behind
nginx (docs/serve.md's configuration: least_conn, passive health checks,
the next upstream on an error or a 502/503), concurrent streaming clients
through it, one instance stopped mid-run: every request is answered
(retried on the other, or ended with an error event), none hangs.
Loopback only; every wait is bounded."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import serve_start

moex, tmp, conf_template = sys.argv[1], sys.argv[2], sys.argv[3]
check = serve_start.check


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


a, port_a = serve_start.start(moex, ["--parallel", "4", "--quiet"])
b, port_b = serve_start.start(moex, ["--parallel", "4", "--quiet"])
port = free_port()
conf = open(conf_template).read()
conf = conf.replace("127.0.0.1:8081", "127.0.0.1:%d" % port_a).replace("127.0.0.1:8082", "127.0.0.1:%d" % port_b)
conf = conf.replace("listen 127.0.0.1:8080", "listen 127.0.0.1:%d" % port)
# the test's own files: pid, logs and temporary paths in tmp, in the foreground
head = ("daemon off;\npid %s/nginx.pid;\nerror_log %s/error.log;\n" % (tmp, tmp))
conf = head + conf.replace("http {", "http {\n    access_log %s/access.log;\n    client_body_temp_path %s/body;\n"
                                      "    proxy_temp_path %s/proxy;\n    fastcgi_temp_path %s/fastcgi;\n"
                                      "    uwsgi_temp_path %s/uwsgi;\n    scgi_temp_path %s/scgi;\n"
                           % (tmp, tmp, tmp, tmp, tmp, tmp), 1)
path = os.path.join(tmp, "nginx.conf")
with open(path, "w") as f:
    f.write(conf)
nginx = subprocess.Popen(["nginx", "-c", path, "-p", tmp], stderr=subprocess.PIPE, text=True)
up = False
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        up = True
        break
    except OSError:
        time.sleep(0.05)
if not up:
    print("FAIL: nginx did not start: %s" % nginx.stderr.read() if nginx.poll() is not None else "FAIL: nginx did not listen")
    sys.exit(1)


def streaming(k, results):
    """A streamed completion through nginx: 'done' ([DONE]), 'error event', or what went wrong."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once upon a time", "max_tokens": 100,
                                                               "stream": True, "seed": k}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            results[k] = "status %d: %s" % (r.status, r.read()[:100])
            return
        last = ""
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: "):
                last = line
        c.close()
        if last == "data: [DONE]":
            results[k] = "done"
        elif last.startswith("data: {") and "error" in json.loads(last[6:]):
            results[k] = "error event"
        else:
            results[k] = "cut after %r" % last[:60]
    except Exception as e:  # noqa: BLE001 - a hung or broken client is a failed check below
        results[k] = "exception %s" % e


def plain(k, results):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Once", "max_tokens": 40, "seed": k}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        c.close()
        results[k] = "done" if r.status == 200 and json.loads(body)["choices"] else "status %d" % r.status
    except Exception as e:  # noqa: BLE001
        results[k] = "exception %s" % e


results = {}
threads = [threading.Thread(target=streaming, args=(k, results)) for k in range(6)]
threads += [threading.Thread(target=plain, args=(k, results)) for k in range(6, 9)]
for t in threads:
    t.start()
time.sleep(0.2)
rc_a = serve_start.stop(a)  # one instance goes away mid-run
for t in threads:
    t.join(90)
hung = [t for t in threads if t.is_alive()]
check(not hung and len(results) == 9, "all 9 requests came back through nginx (%d hung)" % len(hung))
bad = {k: v for k, v in results.items() if v not in ("done", "error event")}
check(not bad, "each ended with [DONE], a whole answer, or an error event (%r)" % (bad or results))
check(rc_a == 0, "the stopped instance exited 0")
after = {}
threads = [threading.Thread(target=plain, args=(k, after)) for k in range(3)]
threads += [threading.Thread(target=streaming, args=(k, after)) for k in range(3, 5)]
for t in threads:
    t.start()
for t in threads:
    t.join(90)
check(all(v == "done" for v in after.values()) and len(after) == 5,
      "after the stop, every request is served by the other instance (%r)" % after)
nginx.terminate()
try:
    nginx.wait(30)
except subprocess.TimeoutExpired:
    nginx.kill()
check(serve_start.stop(b) == 0, "the other instance stops cleanly")
print("cli_serve_nginx: %s" % ("all passed" if serve_start.failures == 0 else "%d failed" % serve_start.failures))
sys.exit(1 if serve_start.failures else 0)
