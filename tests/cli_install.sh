#!/bin/sh
# The install target puts the binary in PREFIX/bin (README: cmake --install
# build --prefix DIR, or make install PREFIX=DIR), and the installed binary runs.
set -u
tmp=${MOEX_TEST_TMP:-/tmp}/cli_install.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
build=$(dirname "$MOEX_BIN")
[ -f "$build/cmake_install.cmake" ] || { echo "SKIP: $build is not a CMake build directory"; exit 77; }
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/log" 2>&1 || { echo "FAIL: cmake --install"; cat "$tmp/log"; exit 1; }
[ -x "$tmp/prefix/bin/moex" ] || { echo "FAIL: no $tmp/prefix/bin/moex"; cat "$tmp/log"; exit 1; }
"$tmp/prefix/bin/moex" run --help | grep -q "usage: moex run" || { echo "FAIL: the installed moex does not run"; exit 1; }
echo "ok: cmake --install puts a working moex in PREFIX/bin"
