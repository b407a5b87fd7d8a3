"""What the serve tests share: starting and stopping `moex serve` on a free
loopback port (the server names it on stderr once the model is loaded),
counting failed checks, the text `moex run` gives a prompt, raw exchanges
of bytes and the /metrics counters."""
import http.client
import os
import re
import socket
import signal
import subprocess
import sys
import threading


def start(moex, args):
    """The server process and its port; exits the test when it does not start.
    The server's stderr lines are kept in server.lines."""
    server = subprocess.Popen([moex, "serve", "--port", "0"] + args, stderr=subprocess.PIPE, text=True)
    server.lines = []
    port = None
    for _ in range(200):  # bounded: the line that names the port comes once the model is loaded
        line = server.stderr.readline()
        if not line:
            break
        server.lines.append(line)
        m = re.search(r"http://(?:127\.0\.0\.1|\[[0-9a-f:]+\]):(\d+)/v1", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("FAIL: moex serve did not start")
        server.kill()
        sys.exit(1)
    threading.Thread(target=lambda: [server.lines.append(line) for line in server.stderr], daemon=True).start()
    return server, port


def stop(server):
    """SIGTERM, then the exit status (None when it had to be killed after 60 s)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        return None


failures = 0


def check(cond, what):
    """Prints the check; a failed one counts in `failures`."""
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


def moex_run_text(moex, tmp, prompt, n, extra):
    """What `moex run` generates after the prompt (read from a file in tmp)."""
    path = os.path.join(tmp, "prompt.txt")
    with open(path, "w") as f:
        f.write(prompt)
    out = subprocess.run([moex, "run", "-f", path, "-n", str(n)] + extra, capture_output=True).stdout.decode()
    assert out.startswith(prompt) and out.endswith("\n")
    return out[len(prompt):-1]


def raw_exchange(port, data, shut=False, read=True, timeout=60):
    """Bytes sent as they are (then the sending side shut, when asked); all
    the server answers until it closes (b"" when not read)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(data)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        out = b""
        while read:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
        return out
    finally:
        sock.close()


def metrics(port, headers=None):
    """/metrics as {name without moex_: value} (labelled series left out)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics", headers=headers or {})
    text = c.getresponse().read().decode()
    c.close()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^moex_(\S+) (\S+)$", text, re.M)}
