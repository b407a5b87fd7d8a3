"""Writes a GGUF holding only a tokenizer, for `moex synth --vocab-from`: so
that a tiny random model can think, for the serve tests of reasoning_content.
Byte-level tokens (GPT-2's byte alphabet, one merge), <think> and </think> as
added tokens, ChatML's control tokens, and a template that opens a think
block in the generation prompt as Qwen3.5's does (unless enable_thinking is
false). Usage: python3 serve_think_vocab.py OUT.gguf"""
import struct
import sys


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_str(k, v):
    return gstr(k) + struct.pack("<I", 8) + gstr(v)


def kv_u32(k, v):
    return gstr(k) + struct.pack("<II", 4, v)


def kv_bool(k, v):
    return gstr(k) + struct.pack("<IB", 7, 1 if v else 0)


def kv_arr_str(k, items):
    return gstr(k) + struct.pack("<IIQ", 9, 8, len(items)) + b"".join(gstr(s) for s in items)


def kv_arr_i32(k, items):
    return gstr(k) + struct.pack("<IIQ", 9, 5, len(items)) + b"".join(struct.pack("<i", x) for x in items)


tokens = byte_alphabet() + ["Ġt", "<think>", "</think>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
types = [1] * 257 + [4, 4, 3, 3, 3]
template = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
            "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
            "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
            "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}")
kvs = [kv_str("general.architecture", "qwen3moe"), kv_str("tokenizer.ggml.model", "gpt2"),
       kv_str("tokenizer.ggml.pre", "qwen2"), kv_arr_str("tokenizer.ggml.tokens", tokens),
       kv_arr_i32("tokenizer.ggml.token_type", types), kv_arr_str("tokenizer.ggml.merges", ["Ġ t"]),
       kv_u32("tokenizer.ggml.eos_token_id", 261), kv_u32("tokenizer.ggml.bos_token_id", 259),
       kv_u32("tokenizer.ggml.padding_token_id", 259), kv_bool("tokenizer.ggml.add_bos_token", False),
       kv_str("tokenizer.chat_template", template)]
with open(sys.argv[1], "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
