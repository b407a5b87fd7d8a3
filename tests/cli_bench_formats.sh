#!/bin/sh
# moex bench like llama-bench: comma lists for -p, -n, -t and -b (one row per
# test and combination), -pg, -d, and -o md|csv|json|jsonl read back by
# python3's csv and json modules; --ops stays out of the table. On a tiny
# synthetic model made here.
. "$(dirname "$0")/shell_lib.sh"
cli_tmpdir cli_bench_formats
cli_clean_env
command -v python3 > /dev/null || { echo "SKIP: no python3 to read the CSV and JSON"; exit 77; }
fail=0
M=$tmp/tiny.gguf
"$MOEX_BIN" synth -o "$M" --preset tiny > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
B="-m $M -p 8,16 -n 3 -pg 4,2 -d 0,5 -t 1,2 -b 4,16 -r 2 --no-warmup --no-roofline --no-pin"
# 2 threads x 2 batch sizes x 2 depths x (2 pp + 1 tg + 1 pg) = 32 rows
for f in csv json jsonl; do
    # shellcheck disable=SC2086
    expect "bench -o $f" 0 "$MOEX_BIN" bench $B -o $f
    cp "$tmp/out" "$tmp/bench.$f"
done
python3 - "$tmp" << 'PY' || fail=1
import csv, json, sys
tmp = sys.argv[1]
rows = {
    "csv": list(csv.DictReader(open(tmp + "/bench.csv"))),
    "json": json.load(open(tmp + "/bench.json")),
    "jsonl": [json.loads(line) for line in open(tmp + "/bench.jsonl") if line.strip()],
}
ok = True
def check(cond, what):
    global ok
    print(("ok: " if cond else "FAIL: ") + what)
    ok &= bool(cond)
want = set()
for t in (1, 2):
    for b in (4, 16):
        for d in (0, 5):
            for pp, tg in ((8, 0), (16, 0), (0, 3), (4, 2)):
                want.add((t, b, pp, tg, d))
for fmt, rs in rows.items():
    got = {(int(r["n_threads"]), int(r["n_batch"]), int(r["n_prompt"]), int(r["n_gen"]), int(r["n_depth"])) for r in rs}
    check(len(rs) == 32 and got == want, f"{fmt}: one row per test, thread count, batch size and depth ({len(rs)} rows)")
    names = {r["test"] for r in rs}
    check({"pp8", "pp16", "tg3", "pp4+tg2", "pp8 @ d5", "tg3 @ d5", "pp4+tg2 @ d5"} <= names, f"{fmt}: test names {sorted(names)}")
    check(all(float(r["avg_ts"]) > 0 for r in rs), f"{fmt}: every avg_ts positive")
    check(all(r["model_type"].startswith("qwen3moe") for r in rs), f"{fmt}: model_type")
for fmt in ("json", "jsonl"):
    check(all(len(r["samples_ts"]) == 2 for r in rows[fmt]), f"{fmt}: samples_ts has -r values")
    check(all((r["weights_gbps"] is None) == (r["n_prompt"] > 0) for r in rows[fmt]), f"{fmt}: GB/s on tg rows only")
sys.exit(0 if ok else 1)
PY

# md: a valid table (every row as many cells as the header), an n_batch
# column with a -b list, --ops after it on stderr.
expect "bench -o md --ops" 0 "$MOEX_BIN" bench -m "$M" -p 8 -n 2 -b 4,8 -r 1 --no-pin -t 1 --ops
python3 - "$tmp/out" << 'PY' || fail=1
import sys
lines = [l.rstrip("\n") for l in open(sys.argv[1])]
start = next(i for i, l in enumerate(lines) if l.startswith("| model"))
table = []
for l in lines[start:]:
    if not l.startswith("|"): break
    table.append([c.strip() for c in l.strip("|").split("|")])
header, sep, body = table[0], table[1], table[2:]
ok = "n_batch" in header and all(len(r) == len(header) for r in table) and all(set(c) <= set("-: ") for c in sep)
ok &= len(body) == 4 and {r[header.index("n_batch")] for r in body} == {"4", "8"}
print(("ok" if ok else "FAIL") + ": md table of %d rows, n_batch column, rows as wide as the header" % len(body))
sys.exit(0 if ok else 1)
PY
grep -q "^| " "$tmp/err" && { echo "FAIL: table rows on stderr"; fail=1; }
says "--ops after the table" "pp8 per run: attention matmuls"
expect "without -b no n_batch column" 0 "$MOEX_BIN" bench -m "$M" -p 8 -n 0 -r 1 --no-roofline -t 1
grep -q "n_batch" "$tmp/out" && { echo "FAIL: n_batch column without -b"; fail=1; }
# The cache note: the tiny model's decode weights fit in any last-level cache.
expect "bench with the roofline" 0 "$MOEX_BIN" bench -m "$M" -p 0 -n 2 -r 1 -t 1
grep -q "^of read BW: the decode weights .* fit in the last-level cache" "$tmp/out" ||
    { [ -z "$(getconf LEVEL3_CACHE_SIZE 2> /dev/null | grep -v '^0$')" ] && echo "note: no cache size known here" ||
        { echo "FAIL: no cache note:"; cat "$tmp/out"; fail=1; }; }

# Errors.
expect "-o xml refused" 2 "$MOEX_BIN" bench -m "$M" -o xml
says "-o xml named" "--output: invalid value 'xml'"
expect "-pg 4 refused" 2 "$MOEX_BIN" bench -m "$M" -pg 4
expect "-t 1,0 refused" 2 "$MOEX_BIN" bench -m "$M" -t 1,0
expect "-d x refused" 2 "$MOEX_BIN" bench -m "$M" -d x
expect "-c below the test and its depth" 2 "$MOEX_BIN" bench -m "$M" -p 8 -n 0 -d 8 -c 10
exit $fail
