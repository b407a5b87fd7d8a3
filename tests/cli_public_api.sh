#!/bin/sh
# The command line is a client of the library like any other: tools/*.c and
# tools/*.h include only moex.h (moex_tools.h) and tools/' own headers (cmd_serve.c also the
# server's, src/serve/serve.h, which is built into the tool beside the
# library), and so does the server itself, src/serve/. The build enforces
# the tools' part too: the moex target gets include/ only.
set -u
src=${MOEX_SRC:?MOEX_SRC is the source directory}
fail=0
n=0
for f in "$src"/tools/*.c "$src"/tools/*.h; do
    n=$((n + 1))
    # every #include "..." of the file, one per line
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $h in
            moex.h|moex_tools.h) ;;
            */*)
                if [ "$(basename "$f")" = cmd_serve.c ] && [ "$h" = serve/serve.h ]; then continue; fi
                echo "FAIL: $(basename "$f") includes \"$h\", a header outside include/ and tools/"; fail=1 ;;
            *)
                [ -f "$src/tools/$h" ] ||
                    { echo "FAIL: $(basename "$f") includes \"$h\", which is not one of tools/' headers"; fail=1; } ;;
        esac
    done
done
[ "$n" -gt 10 ] || { echo "FAIL: only $n files found under $src/tools"; fail=1; }
[ $fail -eq 0 ] && echo "ok: the $n files of tools/ include only moex.h and their own headers"
# The server is the tool's too: src/serve/ includes moex.h and its own headers only.
ns=0
for f in "$src"/src/serve/*.c "$src"/src/serve/*.h; do
    ns=$((ns + 1))
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $h in
            moex.h|moex_tools.h) ;;
            serve/*) [ -f "$src/src/$h" ] || { echo "FAIL: $(basename "$f") includes \"$h\", which is not one of serve's headers"; fail=1; } ;;
            *) echo "FAIL: src/serve/$(basename "$f") includes \"$h\", a header outside include/ and src/serve/"; fail=1 ;;
        esac
    done
done
[ "$ns" -ge 4 ] || { echo "FAIL: only $ns files found under $src/src/serve"; fail=1; }
[ $fail -eq 0 ] && echo "ok: the $ns files of src/serve/ include only moex.h and their own headers"
exit $fail
