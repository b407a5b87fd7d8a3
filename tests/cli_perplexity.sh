#!/bin/sh
# moex perplexity: its figures against ones computed here from `moex eval`'s
# logits (same chunks, same scored half, same definitions as
# llama-perplexity), its output, the KL base file's round trip and layout,
# and its errors. On a small synthetic model made here.
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_perplexity
cli_clean_env
command -v python3 > /dev/null || { echo "SKIP: no python3 to compute the reference figures"; exit 77; }
fail=0
M=$tmp/tiny.gguf
M2=$tmp/tiny-q8.gguf
TEXT=$MOEX_SRC/tests/data/ppl-text.txt
"$MOEX_BIN" synth -o "$M" --preset tiny > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
"$MOEX_BIN" synth -o "$M2" --preset tiny --type q8_0 > /dev/null 2>&1 || { echo "FAIL: synth q8_0"; exit 1; }
CTX=64 CHUNKS=4

expect "perplexity runs" 0 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" -c $CTX --chunks $CHUNKS -t 2
cp "$tmp/out" "$tmp/ppl.out"
# The running estimate, one [i]value, per chunk on one line; then the final line.
grep -Eq "^(\[[0-9]+\][0-9]+\.[0-9]{4},){$CHUNKS}\$" "$tmp/ppl.out" || { echo "FAIL: progress line:"; cat "$tmp/ppl.out"; fail=1; }
grep -Eq '^Final estimate: PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5}$' "$tmp/ppl.out" || { echo "FAIL: final line"; fail=1; }
says "chunk count" "perplexity over $CHUNKS chunks, n_ctx=$CTX"

# The reference: the text's tokens (one trailing newline dropped, as -f does),
# each chunk through moex eval, scored here.
printf '%s' "$(cat "$TEXT")" > "$tmp/text"
"$MOEX_BIN" tokenize -m "$M" -f "$tmp/text" > "$tmp/ids" || fail=1
for c in $(seq 0 $((CHUNKS - 1))); do
    python3 -c "import sys; ids = open(sys.argv[1]).read().split(); c, n = int(sys.argv[2]), int(sys.argv[3]); print(','.join(ids[c*n:(c+1)*n]))" \
        "$tmp/ids" $c $CTX > "$tmp/chunk$c"
    "$MOEX_BIN" eval -m "$M" -t 2 --tokens "$(cat "$tmp/chunk$c")" --logits - > "$tmp/logits$c" 2> /dev/null || { echo "FAIL: eval chunk $c"; fail=1; }
done
python3 - "$tmp" $CHUNKS $CTX 512 << 'EOF' || fail=1
import array, math, re, sys
tmp, chunks, ctx, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = open(tmp + "/ppl.out").read()
running = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+),", out)]
final, err = map(float, re.search(r"PPL = ([0-9.]+) \+/- ([0-9.]+)", out).groups())
nll, nll2, count = 0.0, 0.0, 0
ok = True
for c in range(chunks):
    ids = [int(x) for x in open(f"{tmp}/chunk{c}").read().split(",")]
    logits = array.array("f")
    logits.frombytes(open(f"{tmp}/logits{c}", "rb").read())
    assert len(logits) == ctx * vocab, len(logits)
    for i in range(ctx // 2, ctx - 1):
        row = logits[i * vocab:(i + 1) * vocab]
        mx = max(row)
        v = mx + math.log(sum(math.exp(x - mx) for x in row)) - row[ids[i + 1]]
        nll += v; nll2 += v * v; count += 1
    want = math.exp(nll / count)
    if abs(running[c] - want) > 1e-4 * want + 1e-4:
        print(f"FAIL: chunk {c + 1}: running estimate {running[c]}, computed {want}"); ok = False
mean = nll / count
want_err = math.sqrt((nll2 / count - mean * mean) / (count - 1)) * math.exp(mean)
if count != chunks * (ctx - 1 - ctx // 2): ok = False
if abs(final - math.exp(mean)) > 1e-4 * final or abs(err - want_err) > 1e-3 * want_err + 1e-5:
    print(f"FAIL: final {final} +/- {err}, computed {math.exp(mean)} +/- {want_err}"); ok = False
print("ok: perplexity equals the figures computed from moex eval's logits" if ok else "FAIL: perplexity figures")
sys.exit(0 if ok else 1)
EOF

# Standard input is the text when there is no -f.
expect "perplexity from standard input" 0 sh -c '"$0" perplexity -m "$1" -c 64 --chunks 4 -t 2 < "$2"' "$MOEX_BIN" "$M" "$TEXT"
cmp -s "$tmp/out" "$tmp/ppl.out" || { echo "FAIL: standard input gives other figures"; fail=1; }

# The KL base file: written by a plain run, its size the documented layout's.
TOP=16
expect "base run" 0 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" -c $CTX --chunks $CHUNKS -t 2 \
    --kl-divergence-base "$tmp/base.kl" --kl-top $TOP
cmp -s "$tmp/out" "$tmp/ppl.out" || { echo "FAIL: saving the base changes the figures"; fail=1; }
size=$(wc -c < "$tmp/base.kl")
want=$((24 + 4 * CHUNKS * CTX + CHUNKS * (CTX - 1 - CTX / 2) * (8 + 8 * TOP)))
[ "$size" = "$want" ] || { echo "FAIL: base file of $size bytes, wanted $want"; fail=1; }
head -c 8 "$tmp/base.kl" | grep -q MOEXKLB1 || { echo "FAIL: base file magic"; fail=1; }

# Against itself: no divergence, every top token the same, the same PPL.
expect "KL of a run against itself" 0 "$MOEX_BIN" perplexity -m "$M" -c $CTX --kl-divergence-base "$tmp/base.kl" --kl-divergence -t 2
grep -Eq '^Mean    KLD: +0\.0000[0-9]{2} ' "$tmp/out" || { echo "FAIL: self KL:"; grep KLD "$tmp/out"; fail=1; }
grep -q '^Same top p: 100.000 ' "$tmp/out" || { echo "FAIL: self same top p:"; grep "top p" "$tmp/out"; fail=1; }
grep -q '^Mean PPL(Q)/PPL(base) *:   1.000000 ' "$tmp/out" || { echo "FAIL: self PPL ratio"; grep ratio "$tmp/out"; fail=1; }
[ "$(grep -c '^ *[0-9]\+ ' "$tmp/out")" -ge $CHUNKS ] || { echo "FAIL: a line per chunk"; fail=1; }

# Another model against the base, with every token kept (--kl-top = the
# vocabulary): KL(base || Q), same top p and the PPL ratio as computed here.
expect "full base run" 0 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" -c $CTX --chunks 2 -t 2 \
    --kl-divergence-base "$tmp/full.kl" --kl-top 512
expect "KL of q8_0 against f16" 0 "$MOEX_BIN" perplexity -m "$M2" --kl-divergence-base "$tmp/full.kl" --kl-divergence -t 2
cp "$tmp/out" "$tmp/kl.out"
for c in 0 1; do
    "$MOEX_BIN" eval -m "$M2" -t 2 --tokens "$(cat "$tmp/chunk$c")" --logits - > "$tmp/q$c" 2> /dev/null || fail=1
done
python3 - "$tmp" 2 $CTX 512 << 'EOF' || fail=1
import array, math, re, sys
tmp, chunks, ctx, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = open(tmp + "/kl.out").read()
def logsm(row):
    mx = max(row); z = mx + math.log(sum(math.exp(x - mx) for x in row))
    return [x - z for x in row]
kls, same, nll_p, nll_q = [], 0, 0.0, 0.0
for c in range(chunks):
    ids = [int(x) for x in open(f"{tmp}/chunk{c}").read().split(",")]
    P = array.array("f"); P.frombytes(open(f"{tmp}/logits{c}", "rb").read())
    Q = array.array("f"); Q.frombytes(open(f"{tmp}/q{c}", "rb").read())
    for i in range(ctx // 2, ctx - 1):
        lp, lq = logsm(P[i*vocab:(i+1)*vocab]), logsm(Q[i*vocab:(i+1)*vocab])
        kls.append(sum(math.exp(a) * (a - b) for a, b in zip(lp, lq)))
        same += lp.index(max(lp)) == lq.index(max(lq))
        nll_p -= lp[ids[i + 1]]; nll_q -= lq[ids[i + 1]]
n = len(kls)
want = {"KLD": sum(kls) / n, "top": 100.0 * same / n, "ratio": math.exp((nll_q - nll_p) / n)}
got = {"KLD": float(re.search(r"Mean    KLD: +([0-9.]+)", out).group(1)),
       "top": float(re.search(r"Same top p: +([0-9.]+)", out).group(1)),
       "ratio": float(re.search(r"Mean PPL\(Q\)/PPL\(base\) *: +([0-9.]+)", out).group(1))}
kls.sort()
got["max"] = float(re.search(r"Maximum KLD: +([0-9.]+)", out).group(1)); want["max"] = kls[-1]
ok = want["KLD"] > 0
for k in want:
    if abs(got[k] - want[k]) > 2e-3 * abs(want[k]) + 2e-6:
        print(f"FAIL: {k}: printed {got[k]}, computed {want[k]}"); ok = False
print("ok: KL, same top p, PPL ratio equal the figures computed from moex eval's logits" if ok else "FAIL: KL figures")
sys.exit(0 if ok else 1)
EOF

# Errors: each said, none a crash.
expect "text too short for -c" 2 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" -c 4096
says "too short" "needs at least 8192"
expect "--kl-divergence alone" 2 "$MOEX_BIN" perplexity -m "$M" --kl-divergence
says "--kl-divergence alone" "--kl-divergence needs --kl-divergence-base"
expect "-c against the base's" 2 "$MOEX_BIN" perplexity -m "$M" -c 32 --kl-divergence-base "$tmp/base.kl" --kl-divergence
says "-c against the base's" "holds chunks of 64 tokens"
head -c 1000 "$tmp/base.kl" > "$tmp/cut.kl"
expect "truncated base" 1 "$MOEX_BIN" perplexity -m "$M" --kl-divergence-base "$tmp/cut.kl" --kl-divergence
says "truncated base" "its size is not the one its header implies"
expect "not a base file" 1 "$MOEX_BIN" perplexity -m "$M" --kl-divergence-base "$TEXT" --kl-divergence
says "not a base file" "wrong magic"
expect "base over the model" 2 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" --kl-divergence-base "$M"
expect "bad --chunks" 2 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" --chunks 0
expect "--kl-top without a base" 2 "$MOEX_BIN" perplexity -m "$M" -f "$TEXT" --kl-top 4
exit $fail
