#!/bin/sh
# The shape of the code, checked: devices are described by capabilities
# (no string comparison of a device name outside src/dev/, which keeps the
# one table of names), no source file under src/ over 600 lines, and the
# application header include/moex.h under 40 functions (the rest is in
# include/moex_tools.h).
set -u
src=${MOEX_SRC:?MOEX_SRC is the source directory}
fail=0
names='none|cpu|amx|sim|auto|rknpu|cuda|gpu'
# strcmp(device, "sim"), strcmp("amx", o->device), strncmp(...) and the like:
# a comparison with a device's name whose other side is a device
hits=$(grep -rnE "(str(n|case)?cmp|memcmp)[[:space:]]*\(([^;\"]*dev[^;\"]*,[[:space:]]*\"($names)\"|\"($names)\",[^;\"]*dev)" \
    "$src/src" "$src/tools" --include=*.c --include=*.h | grep -v "^$src/src/dev/")
if [ -n "$hits" ]; then
    echo "FAIL: device names compared outside src/dev/:"
    echo "$hits"
    fail=1
fi
n_files=0
for f in $(find "$src/src" -name '*.c' -o -name '*.h' -o -name '*.cu' | sort); do
    n_files=$((n_files + 1))
    lines=$(wc -l < "$f")
    if [ "$lines" -gt 600 ]; then echo "FAIL: ${f#$src/} has $lines lines (over 600)"; fail=1; fi
done
[ "$n_files" -gt 100 ] || { echo "FAIL: only $n_files source files found under $src/src"; fail=1; }
n_api=$(grep -c '^MOEX_API ' "$src/include/moex.h")
if [ "$n_api" -ge 40 ] || [ "$n_api" -lt 20 ]; then
    echo "FAIL: include/moex.h declares $n_api functions (an application header under 40 is wanted)"
    fail=1
fi
grep -q '#include "moex.h"' "$src/include/moex_tools.h" || { echo "FAIL: moex_tools.h does not include moex.h"; fail=1; }
[ $fail -eq 0 ] && echo "ok: no device name compared outside src/dev/, $n_files files of at most 600 lines, moex.h has $n_api functions"
exit $fail
