"""moex serve's structured output and tool calls over python3's http.client,
for machines without the Node client (tests/cli_serve_grammar.sh): the
bodies' shapes, checked field by field."""
import http.client
import json
import os
import struct
import sys

import serve_start

check = serve_start.check
SCHEMA = {
    "type": "object",
    "properties": {
        "word": {"type": "string", "maxLength": 5},
        "n": {"type": "integer", "minimum": -3, "maximum": 250},
        "pick": {"enum": ["a", "b", None]},
        "list": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
    },
    "required": ["word", "n", "pick", "list"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"key": {"enum": ["x", "y"]}, "k": {"type": "integer"}},
    "required": ["key", "k"], "additionalProperties": False}}}]


def post(port, body, raw=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text if raw else json.loads(text)


def valid(v):
    """v against SCHEMA, by hand."""
    return (isinstance(v, dict) and set(v) == set(SCHEMA["properties"]) and isinstance(v["word"], str) and
            len(v["word"]) <= 5 and isinstance(v["n"], int) and not isinstance(v["n"], bool) and -3 <= v["n"] <= 250 and
            v["pick"] in ("a", "b", None) and isinstance(v["list"], list) and 1 <= len(v["list"]) <= 3 and
            all(isinstance(x, bool) for x in v["list"]))


def with_template(src, dst, template):
    """A copy of the GGUF file src with tokenizer.chat_template replaced."""
    with open(src, "rb") as f:
        d = f.read()
    n_tensors, n_kv = struct.unpack_from("<QQ", d, 8)
    off = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(o):
        n, = struct.unpack_from("<Q", d, o)
        return d[o + 8:o + 8 + n].decode(), o + 8 + n

    def skip(t, o):
        if t == 8:
            return string(o)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, o)
            o += 12
            for _ in range(n):
                o = skip(et, o)
            return o
        return o + sizes[t]

    kvs, alignment = [], 32
    for _ in range(n_kv):
        start = off
        key, off = string(off)
        t, = struct.unpack_from("<I", d, off)
        end = skip(t, off + 4)
        if key == "general.alignment":
            alignment, = struct.unpack_from("<I", d, off + 4)
        if key == "tokenizer.chat_template":
            k, v = key.encode(), template.encode()
            kvs.append(struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v)
        else:
            kvs.append(d[start:end])
        off = end
    for _ in range(n_tensors):   # name, dims, type, offset
        _, off = string(off)
        n_dims, = struct.unpack_from("<I", d, off)
        off += 4 + 8 * n_dims + 4 + 8
    o = 24
    for _ in range(n_kv):
        _, o = string(o)
        t, = struct.unpack_from("<I", d, o)
        o = skip(t, o + 4)
    old_kv_end = o
    data_start = (off + alignment - 1) // alignment * alignment
    head = d[:24] + b"".join(kvs) + d[old_kv_end:off]
    head += b"\0" * ((alignment - len(head) % alignment) % alignment)
    with open(dst, "wb") as f:
        f.write(head + d[data_start:])


def lfm2_checks(moex, model, tmp):
    """Tool calls in LFM2's format: the oracle lfm2moe model with a template
    that names LFM2's tool-list markers (the oracle's own is Qwen3's)."""
    path = os.path.join(tmp, "lfm2-template.gguf")
    with_template(model, path, "{{- bos_token -}}{{- '<|im_start|>' + m -}}List of tools: <|tool_list_start|>[")
    server, port = serve_start.start(moex, ["-m", path, "--parallel", "2", "--threads", "1"])
    try:
        status, r = post(port, {"messages": [{"role": "user", "content": "call"}], "tools": TOOLS, "seed": 4,
                                "tool_choice": "required", "max_tokens": 600})
        c = r["choices"][0]
        calls = c["message"].get("tool_calls") or []
        check(status == 200 and c["finish_reason"] == "tool_calls" and 1 <= len(calls) <= 5 and
              all(json.loads(x["function"]["arguments"])["key"] in ("x", "y") for x in calls) and
              len(set(x["id"] for x in calls)) == len(calls),
              "LFM2: %d call(s) from one <|tool_call_start|> list (%s)" % (len(calls), c["finish_reason"]))
        status, text = post(port, {"messages": [{"role": "user", "content": "call"}], "tools": TOOLS, "seed": 4,
                                   "stream": True, "tool_choice": "required", "max_tokens": 600}, raw=True)
        chunks = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
        streamed = [tc for ch in chunks if ch["choices"] for tc in ch["choices"][0]["delta"].get("tool_calls", [])]
        check([tc["function"]["arguments"] for tc in streamed] == [x["function"]["arguments"] for x in calls] and
              [tc["index"] for tc in streamed] == list(range(len(calls))),
              "LFM2: the stream's calls are the reply's, indexed 0..%d" % (len(calls) - 1))
    finally:
        serve_start.stop(server)


def main():
    moex, model = sys.argv[1], sys.argv[2]
    server, port = serve_start.start(moex, ["-m", model, "--parallel", "2", "--threads", "1"])
    try:
        ok = 0
        for seed in range(12):
            status, r = post(port, {"messages": [{"role": "user", "content": "json"}], "seed": seed, "max_tokens": 300,
                                    "response_format": {"type": "json_schema",
                                                        "json_schema": {"name": "s", "strict": True, "schema": SCHEMA}}})
            c = r["choices"][0]
            try:
                v = json.loads(c["message"]["content"])
            except ValueError:
                v = None
            if status == 200 and c["finish_reason"] == "stop" and valid(v):
                ok += 1
            else:
                print("  seed %d: %s" % (seed, json.dumps(c)))
        check(ok == 12, "json_schema: %d of 12 replies valid" % ok)

        status, r = post(port, {"messages": [{"role": "user", "content": "call"}], "tools": TOOLS, "seed": 1,
                                "tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 200})
        c = r["choices"][0]
        calls = c["message"].get("tool_calls") or []
        check(c["finish_reason"] == "tool_calls" and c["message"]["content"] is None and len(calls) == 1,
              "a forced call: finish_reason tool_calls, content null, one call (%s)" % json.dumps(c))
        if calls:
            args = json.loads(calls[0]["function"]["arguments"])
            check(calls[0]["type"] == "function" and calls[0]["id"].startswith("call_") and
                  calls[0]["function"]["name"] == "lookup" and args["key"] in ("x", "y") and isinstance(args["k"], int),
                  "the call's id, name and arguments (a JSON string)")

        status, text = post(port, {"messages": [{"role": "user", "content": "call"}], "tools": TOOLS, "seed": 2,
                                   "stream": True, "max_tokens": 200, "parallel_tool_calls": False,
                                   "tool_choice": {"type": "function", "function": {"name": "lookup"}}}, raw=True)
        chunks = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
        deltas = [ch["choices"][0] for ch in chunks if ch["choices"]]
        with_calls = [d for d in deltas if d["delta"].get("tool_calls")]
        finishes = [d for d in deltas if d["finish_reason"]]
        check(status == 200 and len(with_calls) == 1 and len(finishes) == 1 and
              finishes[0]["finish_reason"] == "tool_calls" and not finishes[0]["delta"].get("tool_calls") and
              deltas.index(with_calls[0]) < deltas.index(finishes[0]),
              "streamed: one tool_calls delta, then the finish chunk (tool_calls)")
        if with_calls:
            tc = with_calls[0]["delta"]["tool_calls"][0]
            check(tc["index"] == 0 and tc["id"].startswith("call_") and tc["function"]["name"] == "lookup" and
                  json.loads(tc["function"]["arguments"])["key"] in ("x", "y"), "the streamed call's fields")
        check(not any(d["delta"].get("content") for d in deltas), "no call text leaks into the content")

        # a forced form renders the prompt with thinking off (the empty think block)
        msgs = [{"role": "user", "content": "think?"}]
        counts = [post(port, dict(body, messages=msgs, max_tokens=1))[1]["usage"]["prompt_tokens"] for body in (
            {}, {"chat_template_kwargs": {"enable_thinking": False}},
            {"response_format": {"type": "json_object"}}, {"tools": TOOLS, "tool_choice": "required"},
            {"tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False}})]
        check(counts[1] > counts[0] and counts[2] == counts[1] and counts[3] == counts[4],
              "a forced form's prompt ends in the empty think block (prompt tokens %s)" % counts)

        status, r = post(port, {"messages": [{"role": "user", "content": "g"}], "max_tokens": 8, "seed": 5,
                                "grammar": 'root ::= "ok" [0-9]'})
        check(status == 200 and len(r["choices"][0]["message"]["content"]) == 3 and
              r["choices"][0]["message"]["content"].startswith("ok"), "a GBNF grammar holds the reply")
        for body, param, want in [
            ({"grammar": "root ::= \"a\"\nbad ::= (\n"}, "grammar", "line 2, column 9: unclosed '('"),
            ({"grammar": 3}, "grammar", "must be a string"),
            ({"response_format": {"type": "xml"}}, "response_format", "text, json_object or json_schema"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
                                                                                                   "format": "email"}}}},
             "response_format", "unsupported 'format' \"email\""),
            ({"tools": [{"type": "function"}]}, "tools", "tools[0]"),
            ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "must be none, auto, required"),
            ({"tools": TOOLS, "tool_choice": "required", "grammar": "root ::= \"a\""}, "grammar", "cannot be combined"),
            ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "must be a boolean"),
        ]:
            body["messages"] = [{"role": "user", "content": "x"}]
            status, r = post(port, body)
            err = r.get("error", {})
            check(status == 400 and err.get("param") == param and want in err.get("message", ""),
                  "refused with 400 naming %s: %s" % (param, err.get("message")))
    finally:
        serve_start.stop(server)
    if len(sys.argv) > 4:
        lfm2_checks(moex, sys.argv[3], sys.argv[4])
    sys.exit(1 if serve_start.failures else 0)


main()
