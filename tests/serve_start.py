"""Starting and stopping `moex serve` for the serve tests: on a free loopback
port, which the server names on stderr once the model is loaded."""
import re
import signal
import subprocess
import sys
import threading


def start(moex, args):
    """The server process and its port; exits the test when it does not start."""
    server = subprocess.Popen([moex, "serve", "--port", "0"] + args, stderr=subprocess.PIPE, text=True)
    port = None
    for _ in range(200):  # bounded: the line that names the port comes once the model is loaded
        line = server.stderr.readline()
        if not line:
            break
        m = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        print("FAIL: moex serve did not start")
        server.kill()
        sys.exit(1)
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    return server, port


def stop(server):
    """SIGTERM, then the exit status (None when it had to be killed after 60 s)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        return None
