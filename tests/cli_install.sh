#!/bin/sh
# cmake --install (README: cmake --install build --prefix DIR, or make install
# PREFIX=DIR) puts the binary, the static and shared library (with its ABI
# soname), include/moex.h and moex.pc under the prefix; the installed binary
# runs, and examples/generate.c builds against the installed library with
# pkg-config alone and generates text, linked shared and static.
set -u
tmp=${MOEX_TEST_TMP:-/tmp}/cli_install.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
build=$(dirname "$MOEX_BIN")
src=${MOEX_SRC:-$(dirname "$0")/..}
[ -f "$build/cmake_install.cmake" ] || { echo "SKIP: $build is not a CMake build directory"; exit 77; }
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/log" 2>&1 || { echo "FAIL: cmake --install"; cat "$tmp/log"; exit 1; }
[ -x "$prefix/bin/moex" ] || { echo "FAIL: no $prefix/bin/moex"; cat "$tmp/log"; exit 1; }
"$prefix/bin/moex" run --help | grep -q "usage: moex run" || { echo "FAIL: the installed moex does not run"; exit 1; }
echo "ok: cmake --install puts a working moex in PREFIX/bin"
fail=0
pc=$(find "$prefix" -name moex.pc | head -1)
lib=$(dirname "$(find "$prefix" -name libmoex.a | head -1)")
abi=$(sed -n 's/^#define MOEX_ABI \([0-9]*\).*/\1/p' "$src/include/moex.h")
for f in "$prefix/include/moex.h" "$lib/libmoex.a" "$lib/libmoex.so" "$lib/libmoex.so.$abi" "$pc"; do
    [ -f "$f" ] && echo "ok: installed $f" || { echo "FAIL: not installed: $f"; fail=1; }
done
if command -v readelf > /dev/null; then
    readelf -d "$lib/libmoex.so" | grep -q "SONAME.*libmoex.so.$abi" && echo "ok: soname libmoex.so.$abi" \
        || { echo "FAIL: libmoex.so has no soname libmoex.so.$abi"; fail=1; }
    # only the public API is exported
    if command -v nm > /dev/null; then
        other=$(nm -D --defined-only "$lib/libmoex.so" | awk '$2 ~ /^[TDB]$/ && $3 !~ /^moex_/ {print $3}' | head -3)
        [ -z "$other" ] && echo "ok: libmoex.so exports only moex_* symbols" || { echo "FAIL: exported: $other"; fail=1; }
    fi
fi
command -v pkg-config > /dev/null || { echo "SKIP: no pkg-config to build the example with"; exit 77; }
cc=${CC:-cc}
export PKG_CONFIG_PATH="$(dirname "$pc")"
pkg-config --modversion moex > "$tmp/version" 2>&1 \
    && grep -qx "$(sed -n 's/^#define MOEX_VERSION "\(.*\)"/\1/p' "$src/include/moex.h")" "$tmp/version" \
    && echo "ok: pkg-config moex: version $(cat "$tmp/version")" || { echo "FAIL: pkg-config moex"; cat "$tmp/version"; fail=1; }
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/examples/generate.c" $(pkg-config --cflags --libs moex) -o "$tmp/gen" \
    > "$tmp/cc" 2>&1 || { echo "FAIL: the example does not build with pkg-config --cflags --libs moex"; cat "$tmp/cc"; exit 1; }
# shellcheck disable=SC2046
$cc -std=c11 "$src/examples/generate.c" $(pkg-config --cflags moex) "$lib/libmoex.a" $(pkg-config --libs-only-other moex) -lpthread -lm \
    -o "$tmp/gen-static" > "$tmp/cc" 2>&1 || { echo "FAIL: the example does not link the static library"; cat "$tmp/cc"; exit 1; }
"$prefix/bin/moex" synth --preset tiny -o "$tmp/tiny.gguf" > /dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
for g in gen gen-static; do
    LD_LIBRARY_PATH="$lib" "$tmp/$g" "$tmp/tiny.gguf" "Once upon a time" 8 > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "^Once upon a time" "$tmp/out" && grep -q "prompt tokens, [0-9]* generated" "$tmp/err"; then
        echo "ok: the example ($g) generates with the installed library"
    else
        echo "FAIL: the example ($g): exit $rc"; cat "$tmp/out" "$tmp/err"; fail=1
    fi
done
[ "$(cat "$tmp/out")" = "$(LD_LIBRARY_PATH="$lib" "$tmp/gen" "$tmp/tiny.gguf" "Once upon a time" 8 2> /dev/null)" ] \
    && echo "ok: shared and static give the same text" || { echo "FAIL: shared and static differ"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "cli_install: all passed"
