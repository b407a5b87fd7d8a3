#!/bin/sh
# The command line is a client of the library like any other: tools/*.c and
# tools/*.h include only moex.h and tools/' own headers (cmd_serve.c also the
# server's, src/serve/serve.h, which is built into the tool beside the
# library). The build enforces it too: the moex target gets include/ only.
set -u
src=${MOEX_SRC:?MOEX_SRC is the source directory}
fail=0
n=0
for f in "$src"/tools/*.c "$src"/tools/*.h; do
    n=$((n + 1))
    # every #include "..." of the file, one per line
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $h in
            moex.h) ;;
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
exit $fail
