#!/bin/sh
# Writes seed inputs for the fuzz targets into DIR/<target>/ (default:
# $TMPDIR/moex-fuzz/seeds): small valid GGUF files that between them use
# every metadata type, string and empty arrays, versions 2 and 3, several
# tensor types and alignments; small pack files (docs/pack-format.md) of both
# layouts, with and without extra experts, their checksums left for
# fuzz_packfile to repair; and, with MOEX_BIN set to a moex binary, the
# smallest models `moex synth` makes (one layer, dim 32, 300 tokens: the
# built-in vocabulary and, where the oracle directory is, Qwen3's; a 3-layer
# lfm2moe and a 4-layer qwen35moe) for the model and tokenizer loaders, and
# routing statistics (moex profile) of two of them for the statistics
# reader. Needs python3; without it the GGUF and pack seeds are skipped.
set -eu
dir=${1:-${TMPDIR:-/tmp}/moex-fuzz/seeds}
mkdir -p "$dir/fuzz_gguf" "$dir/fuzz_packfile" "$dir/fuzz_model" "$dir/fuzz_tokenizer" "$dir/fuzz_stats"
if [ -n "${MOEX_BIN:-}" ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    oracle=${MOEX_ORACLE:-$root/../shared/oracle}
    tiny="--preset tiny --layers 1 --dim 32 --experts 2 --top-k 1 --expert-ffn 32 --heads 1 --kv-heads 1 --head-dim 32 --vocab 300 -q"
    # shellcheck disable=SC2086
    "$MOEX_BIN" synth -o "$dir/fuzz_model/builtin-f16.gguf" $tiny --type f16
    # shellcheck disable=SC2086
    "$MOEX_BIN" synth -o "$dir/fuzz_model/builtin-q8_0.gguf" $tiny --type q8_0 --dim 64 --head-dim 64 --expert-ffn 64
    # lfm2moe's conv, attention and dense layers: 3 layers (the attention is
    # its third), Q8_0, 97 KiB
    # shellcheck disable=SC2086
    "$MOEX_BIN" synth -o "$dir/fuzz_model/lfm2moe-q8_0.gguf" $tiny --arch lfm2moe --preset lfm2-tiny --layers 3 \
        --type q8_0
    # qwen35moe's delta-net and attention layers: its shared expert and
    # delta-net widths are the preset's, so this one is 295 KiB
    # shellcheck disable=SC2086
    "$MOEX_BIN" synth -o "$dir/fuzz_model/qwen35moe-q8_0.gguf" $tiny --arch qwen35moe --preset qwen35-tiny --layers 4 \
        --type q8_0
    cp "$dir/fuzz_model/builtin-f16.gguf" "$dir/fuzz_tokenizer/"
    # routing statistics of the smallest model and of the lfm2moe one (moex profile)
    "$MOEX_BIN" profile -m "$dir/fuzz_model/builtin-f16.gguf" --random-tokens 64 --seq 16 -t 1 -q \
        -o "$dir/fuzz_stats/builtin.stats" 2> /dev/null
    "$MOEX_BIN" profile -m "$dir/fuzz_model/lfm2moe-q8_0.gguf" --random-tokens 64 --seq 16 -t 1 -q \
        -o "$dir/fuzz_stats/lfm2moe.stats" 2> /dev/null
    if [ -f "$oracle/tokenizer/qwen3-vocab.gguf" ]; then
        # shellcheck disable=SC2086
        "$MOEX_BIN" synth -o "$dir/fuzz_tokenizer/qwen3-300.gguf" $tiny --type f16 \
            --vocab-from "$oracle/tokenizer/qwen3-vocab.gguf"
        cp "$dir/fuzz_tokenizer/qwen3-300.gguf" "$dir/fuzz_model/"
    fi
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "make-corpus.sh: python3 not found, no seeds written" >&2
    exit 0
fi
python3 - "$dir/fuzz_gguf" <<'PY'
import struct, sys, os
out = sys.argv[1]

def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack('<Q', len(b)) + b

FMT = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}

def value(t, v):
    if t == 8:
        return s(v)
    if t == 9:
        et, items = v
        body = b''.join(value(et, x) for x in items)
        return struct.pack('<IQ', et, len(items)) + body
    return struct.pack('<' + FMT[t], v)

# (block_size, type_size) of the tensor types the seeds use
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}

def gguf(kvs, tensors, version=3, alignment=32):
    h = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs))
    for k, t, v in kvs:
        h += s(k) + struct.pack('<I', t) + value(t, v)
    offs, data = [], b''
    for name, typ, ne in tensors:
        bs, ts = BLOCK[typ]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // bs * ts
        data += b'\0' * (-len(data) % alignment)
        offs.append(len(data))
        data += bytes((i * 37 + len(name)) & 0xff for i in range(nbytes))
    for (name, typ, ne), off in zip(tensors, offs):
        h += s(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', d) for d in ne)
        h += struct.pack('<IQ', typ, off)
    h += b'\0' * (-len(h) % alignment)
    return h + data

def save(name, blob):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(blob)

every = [
    ('general.architecture', 8, 'qwen3moe'), ('s.u8', 0, 200), ('s.i8', 1, -3), ('s.u16', 2, 60000),
    ('s.i16', 3, -300), ('s.u32', 4, 4000000000), ('s.i32', 5, -7), ('s.f32', 6, 0.5), ('s.bool', 7, True),
    ('s.u64', 10, 1 << 40), ('s.i64', 11, -(1 << 40)), ('s.f64', 12, 0.1), ('s.str', 8, 'hello'),
    ('a.u8', 9, (0, [1, 2, 3])), ('a.i32', 9, (5, [-1, 0, 1])), ('a.f32', 9, (6, [0.5, -2.0])),
    ('a.bool', 9, (7, [True, False])), ('a.u64', 9, (10, [1, 2])), ('a.f64', 9, (12, [1.5])),
    ('a.str', 9, (8, ['a', '', 'ccc'])), ('a.empty', 9, (4, [])), ('a.empty_str', 9, (8, [])),
]
save('empty-v3.gguf', gguf([], []))
save('empty-v2.gguf', gguf([], [], version=2))
save('every-type.gguf', gguf(every, []))
model_kv = [('general.architecture', 8, 'qwen3moe'), ('qwen3moe.block_count', 4, 1),
            ('qwen3moe.expert_count', 4, 2), ('tokenizer.ggml.tokens', 9, (8, ['a', 'b', '<|im_end|>'])),
            ('tokenizer.ggml.token_type', 9, (5, [1, 1, 3]))]
tensors = [('token_embd.weight', 0, [4, 3]), ('blk.0.attn_q.weight', 8, [32, 2]),
           ('blk.0.ffn_gate_exps.weight', 12, [256, 1, 2]), ('output.weight', 14, [256, 1]),
           ('blk.0.attn_norm.weight', 30, [2, 1, 1, 3]), ('x.f16', 1, [5]), ('x.q4_0', 2, [32])]
save('model-a32.gguf', gguf(model_kv, tensors))
save('model-a64.gguf', gguf(model_kv + [('general.alignment', 4, 64)], tensors, alignment=64))
save('model-a1.gguf', gguf([('general.alignment', 4, 1)], tensors[:2], alignment=1))
save('model-v2.gguf', gguf(model_kv, tensors[:3], version=2))
PY
python3 - "$dir/fuzz_packfile" <<'PY'
import struct, sys, os
out = sys.argv[1]

def up(x, a):
    return (x + a - 1) // a * a

# Pack file version 2 with 64-byte alignment (the least a reader accepts),
# so that seeds stay small; checksums are zero (fuzz_packfile repairs them).
# host: (source offset, rows, cols) of Q4_K matrices in the interleaved layout.
def pack(layout, layers, experts, embd, ff, pinned, extra, all_flag=0, align=64, host=(), no_device=False):
    if no_device:
        pinned, extra = [], []
    order = pinned + extra
    n = 3 * len(order)
    slot_values, max_n = embd * ff, max(embd, ff)
    code_stride, scale_stride = (0, 0) if no_device else (up(slot_values, 64), up(4 * max_n, 64))
    plan_off = up(512, align)
    index_off = up(plan_off + 4 * len(pinned), align)
    data_off = up(index_off + 64 * n, align)
    scales_off = up(data_off + n * code_stride, align)
    end = scales_off + n * scale_stride
    entries, at = [], up(end, align)
    for (src, rows, cols) in host:
        nbytes = rows * (cols // 256) * 144
        entries.append((src, rows, cols, at, nbytes))
        at = up(at + nbytes, align)
    host_off = up(end, align) if host else end
    host_end = entries[-1][3] + entries[-1][4] if host else end
    hindex_off = up(host_end, align) if host else end
    size = hindex_off + 64 * len(host)
    blob = bytearray(size)
    h = struct.pack('<8sIIQII', b'MOEXPACK', 2, 512, size, align, 5)
    if no_device:
        h += b'\0' * 48
    else:
        h += struct.pack('<IIIIQII', layout, 1, 64 if layout else 1, 16 if layout else 1, slot_values, max_n,
                         scale_stride)
        h += b'cpu'.ljust(16, b'\0') if layout == 0 else b'amx'.ljust(16, b'\0')
    h += struct.pack('<QQIIII', 12345, 0x1234, layers, experts, embd, ff)
    h += struct.pack('<IIII', 12, 12, 12, 0)
    if no_device:
        h += b'\0' * 44 + struct.pack('<I', 2) + b'\0' * 16
    else:
        h += struct.pack('<QQQdIIII', 1 << 20, 3 * (code_stride + up(4 * max_n, 64)), 0, 0.25, len(pinned),
                         len(pinned), n, all_flag)
        h += struct.pack('<Q', code_stride) + b'\0' * 8
    for kind, off, sz in ((1, plan_off, 4 * len(pinned)), (2, index_off, 64 * n), (3, data_off, end - data_off),
                          (4, host_off, host_end - host_off), (5, hindex_off, 64 * len(host))):
        h += struct.pack('<IIQQQ', kind, 0, off, sz, 0)
    h += struct.pack('<I', len(host))
    blob[:len(h)] = h
    for i, k in enumerate(pinned):
        struct.pack_into('<I', blob, plan_off + 4 * i, k)
    for j in range(n):
        key, m = order[j // 3], j % 3
        K, N = (ff, embd) if m == 2 else (embd, ff)
        struct.pack_into('<IIIIIIQQQQQ', blob, index_off + 64 * j, key // experts, key % experts, m, 12, K, N,
                         data_off + j * code_stride, K * N, scales_off + j * scale_stride, 4 * N, 0)
        for b in range(K * N):
            blob[data_off + j * code_stride + b] = (b * 7 + j) % 255
        for c in range(N):
            struct.pack_into('<f', blob, scales_off + j * scale_stride + 4 * c, 0.01 * (c + 1))
    for j, (src, rows, cols, off, nbytes) in enumerate(entries):
        struct.pack_into('<QIIQQQQQQ', blob, hindex_off + 64 * j, src, 12, 1, rows, cols, off, nbytes, 0, 0)
        for b in range(0, nbytes, 97):
            blob[off + b] = (b + j) % 251
    return bytes(blob)

def save(name, blob):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(blob)

save('rows-1x1.mxpk', pack(0, 1, 1, 16, 16, [0], []))
save('rows-2x2-extra.mxpk', pack(0, 2, 2, 16, 32, [3], [0, 1, 2], all_flag=1))
save('rows-no-plan.mxpk', pack(0, 1, 3, 16, 16, [], [1]))
save('amx-1x2.mxpk', pack(1, 1, 2, 64, 64, [1], []))
save('rows-host.mxpk', pack(0, 1, 1, 16, 16, [0], [], host=[(4096, 16, 256), (90000, 32, 256)]))
save('host-only.mxpk', pack(0, 2, 4, 256, 256, [], [], host=[(8192, 16, 512)], no_device=True))
PY
echo "seeds in $dir"
