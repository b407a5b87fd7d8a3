"""moex serve's structured output and tool calls over python3's http.client,
for machines without the Node client (tests/cli_serve_grammar.sh): the
bodies' shapes, checked field by field."""
import http.client
import json
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
    sys.exit(1 if serve_start.failures else 0)


main()
