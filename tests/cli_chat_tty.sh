#!/bin/sh
# moex chat on a terminal, driven through a pseudo-terminal (python3's pty):
# the line editor (arrows, Ctrl-A/E, backspace, history with Up), /help,
# /save and /load, a context that drops its oldest turns instead of
# stopping, Ctrl-C in the middle of a reply (back to the prompt) and a second
# Ctrl-C at the empty prompt (quits). On a tiny synthetic model made here.
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_chat_tty
cli_clean_env
command -v python3 > /dev/null || { echo "SKIP: no python3 to drive a pseudo-terminal"; exit 77; }
M=$tmp/tiny.gguf
"$MOEX_BIN" synth -o "$M" --preset tiny > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
python3 - "$MOEX_BIN" "$M" "$tmp" << 'PY'
import os, pty, select, sys, time
moex, model, tmp = sys.argv[1:4]
ok = True

def check(cond, what):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)
    return cond

class Chat:
    def __init__(self, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(moex, [moex, "chat", "-m", model, "-t", "1", "--no-pin", *args])
        self.buf = b""
        self.seen = b""  # everything read, for the checks
    def until(self, pat, timeout=120):
        """Reads until pat; returns what came before it and pat."""
        end = time.time() + timeout
        while pat not in self.buf:
            left = end - time.time()
            r, _, _ = select.select([self.fd], [], [], max(0, left))
            if not r:
                raise TimeoutError("no %r in %r" % (pat, self.buf[-400:]))
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                raise EOFError("ended before %r: %r" % (pat, self.buf[-400:]))
            self.buf += data
            self.seen += data
        i = self.buf.index(pat) + len(pat)
        got, self.buf = self.buf[:i], self.buf[i:]
        return got
    def more(self, n, timeout=60):
        """Reads until n more bytes have come."""
        want, end = len(self.seen) + n, time.time() + timeout
        while len(self.seen) < want:
            r, _, _ = select.select([self.fd], [], [], max(0, end - time.time()))
            if not r:
                raise TimeoutError("fewer than %d bytes: %r" % (n, self.buf[-400:]))
            data = os.read(self.fd, 1)
            self.buf += data
            self.seen += data
    def send(self, data):
        os.write(self.fd, data)
    def prompt(self):
        return self.until(b"\r> \x1b[K")
    def turn(self, keys):
        """Types keys (ending in Enter), waits for the reply's stats line and the next prompt."""
        self.send(keys)
        out = self.until(b"moex: new prompt")
        self.prompt()
        return out
    def wait(self):
        try:
            while os.read(self.fd, 65536):
                pass
        except OSError:
            pass
        return os.waitpid(self.pid, 0)[1]

LEFT, RIGHT, UP = b"\x1b[D", b"\x1b[C", b"\x1b[A"
CTRL_A, CTRL_E, CTRL_C, CTRL_D, BACKSPACE = b"\x01", b"\x05", b"\x03", b"\x04", b"\x7f"

# Session 1: editing, history, commands, a context of 96 tokens that shifts.
c = Chat("--temp", "0", "-n", "6", "-c", "96", "--ignore-eos")
c.prompt()
c.send(b"/help\r")
check(b"/save FILE" in c.prompt(), "/help lists the commands")
# "ac", Left, "b" -> "abc"; Ctrl-A "<", Ctrl-E ">>", Backspace -> "<abc>"; Left Right change nothing
c.turn(b"ac" + LEFT + b"b" + CTRL_A + b"<" + CTRL_E + b">>" + BACKSPACE + LEFT + RIGHT + b"\r")
c.turn(UP + b"\r")  # the same line again, from the history
c.send(b"/save " + tmp.encode() + b"/conv.txt\r")
check(b"saved 4 messages" in c.prompt(), "/save says what it wrote")
saved = open(tmp + "/conv.txt", encoding="latin-1").read().splitlines()
check(saved[0] == "moex chat 1" and [l for l in saved if l.startswith("user ")] == ["user <abc>", "user <abc>"],
      "arrows, Ctrl-A/E, backspace and Up made '<abc>' twice: %r" % saved[:3])
# more turns than the context holds: the oldest go, every turn is answered
answered = 0
for i in range(8):
    out = c.turn(b"turn number %d\r" % i)
    answered += 1
check(answered == 8 and b"oldest message" in c.seen and b"exceeds the context" not in c.seen,
      "a full context drops its oldest turns and the chat goes on")
c.send(b"/load " + tmp.encode() + b"/conv.txt\r")
check(b"loaded 4 messages" in c.prompt(), "/load reads the saved conversation")
c.send(b"junk" + CTRL_C)  # Ctrl-C on a typed line drops it
c.prompt()
check(b"new prompt" not in c.buf, "Ctrl-C on a typed line sends nothing")
c.send(CTRL_D)
check(c.wait() == 0, "Ctrl-D at an empty prompt quits with status 0")

# Session 2: Ctrl-C in the middle of a long reply, then again at the prompt.
c = Chat("--temp", "0", "-n", "-1", "-c", "8192", "--ignore-eos")
c.prompt()
c.send(b"tell me a long story\r")
c.until(b"story\x1b[K\r\n")
c.more(40)  # the reply is on its way
c.send(CTRL_C)
out = c.until(b"[stopped]")
stats = c.until(b"\r> \x1b[K")
check(b"generated" in stats and b"context is full" not in stats,
      "Ctrl-C stops the reply and returns to the prompt")
c.send(CTRL_C)
status = c.wait()
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "a second Ctrl-C at the empty prompt quits (status %d)" % status)
sys.exit(0 if ok else 1)
PY
