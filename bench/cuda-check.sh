#!/bin/sh
# The cuda device's check on a GPU machine, in one run of a few minutes
# (docs/cuda.md, "What the GPU run has to show"): builds moex with its CUDA
# kernels, runs the CUDA tests on the device (kernels against their host
# twins, VRAM within the budget), makes the 48-layer q30b Q4_K_M model,
# probes the GPU, then benchmarks moex (CPU only, --device cuda at each
# budget and fully resident) beside llama.cpp's CUDA build (-ngl 99 with the
# --n-cpu-moe that fits each budget, and fully resident), sampling the VRAM
# in use from nvidia-smi during every run. Writes a markdown report.
# It never builds or downloads a peer: LLAMA_BENCH names a llama-bench built
# with CUDA for this GPU (cmake -B build -DGGML_CUDA=ON -DCMAKE_BUILD_TYPE=Release).
#
#   [LLAMA_BENCH=.../llama-bench] [WORK=dir] [OUT=file.md] [BUILD=build-cuda]
#   [PRESET=q30b] [TYPE=q4_k_m] [THREADS=N] [BUDGETS="4 8"] [PP=512] [TG=128]
#   [REPS=1] [STAGES="build test synth probe bench"] [MOEX_CUDA=ON] [ORACLE=dir] sh bench/cuda-check.sh
#
# ORACLE names the oracle directory (default ../shared/oracle beside the
# source): test_cuda_exec reads 19 MB of it (the qwen3moe Q4_K_M and Q8_0,
# lfm2moe and qwen35moe Q4_K_M files, their ids and llama.cpp's logits) and
# skips without it.
# WORK keeps the model between runs (a second run skips the synth). BUDGETS
# are GiB of VRAM. STAGES picks the steps: without a GPU, "build test" and
# "synth probe bench" with a small PRESET still run (the cuda rows then say
# why the device cannot open).
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
WORK=${WORK:-$HOME/moex-cuda-check}
BUILD=${BUILD:-build-cuda}
PRESET=${PRESET:-q30b}
TYPE=${TYPE:-q4_k_m}
THREADS=${THREADS:-$(nproc)}
BUDGETS=${BUDGETS:-"4 8"}
PP=${PP:-512}
TG=${TG:-128}
REPS=${REPS:-1}
STAGES=${STAGES:-"build test synth probe bench"}
MOEX_CUDA=${MOEX_CUDA:-ON}
OUT=${OUT:-$WORK/cuda-check.md}
LLAMA_BENCH=${LLAMA_BENCH:-}
MOEX=$BUILD/moex
MODEL=$WORK/$PRESET-$TYPE.gguf
mkdir -p "$WORK" "$WORK/logs"
LOGS=$WORK/logs
fail=0

stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
say() { echo "== $* ($(($(date +%s) - start)) s in)" >&2; }
report() { printf '%s\n' "$*" >> "$OUT"; }

: > "$OUT"
report "# moex --device cuda check ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
report ""
report "CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v nvidia-smi > /dev/null 2>&1; then
    report "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
else
    report "GPU: none (no nvidia-smi)"
fi
report ""

# ---- the VRAM in use while a command runs: nvidia-smi's peak, MiB ----
vram_sampler_start() {
    vram_log=$1
    : > "$vram_log"
    command -v nvidia-smi > /dev/null 2>&1 || { vram_pid=; return; }
    ( while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 >> "$vram_log"; sleep 0.2; done ) &
    vram_pid=$!
}
vram_sampler_stop() { # prints the peak minus the idle level measured before
    [ -n "$vram_pid" ] && kill "$vram_pid" 2> /dev/null && wait "$vram_pid" 2> /dev/null
    [ -s "$vram_log" ] || { echo "-"; return; }
    sort -n "$vram_log" | tail -1 | awk -v idle="$vram_idle" '{ print $1 - idle }'
}
vram_idle=0
command -v nvidia-smi > /dev/null 2>&1 &&
    vram_idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)

# ---- build ----
if stage build; then
    say "build (MOEX_CUDA=$MOEX_CUDA)"
    if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEX_WERROR=ON -DMOEX_CUDA="$MOEX_CUDA" \
        ${ORACLE:+-DMOEX_ORACLE_DIR="$ORACLE"} > "$LOGS/cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j "$(nproc)" > "$LOGS/build.log" 2>&1; then
        report "build: $(grep -h 'cuda device:' "$LOGS/cmake.log" | sed 's/^-- //')"
    else
        report "build: FAILED (logs/cmake.log, logs/build.log):"; report '```'
        tail -20 "$LOGS/build.log" "$LOGS/cmake.log" >> "$OUT"; report '```'
        echo "cuda-check: the build failed; see $OUT" >&2
        exit 1
    fi
fi
[ -x "$MOEX" ] || { echo "cuda-check: no moex at $MOEX (run the build stage)" >&2; exit 2; }

# ---- the CUDA tests on the device ----
if stage test; then
    say "tests"
    vram_sampler_start "$LOGS/vram-tests"
    (cd "$BUILD" && ctest -R 'cuda' --output-on-failure -V) > "$LOGS/tests.log" 2>&1
    rc=$?
    vram=$(vram_sampler_stop)
    report "## Tests (ctest -R cuda): $([ $rc -eq 0 ] && echo passed || echo FAILED)"
    report ""
    report '```'
    grep -hE '^[0-9]+: (SKIP|.*checks|.*compute capability|VRAM in use|.*CHECK failed|ok:|FAIL)' "$LOGS/tests.log" | sed 's/^[0-9]*: //' >> "$OUT"
    grep -hE 'Test +#[0-9]+: ' "$LOGS/tests.log" >> "$OUT"
    report '```'
    report "VRAM in use during the tests (nvidia-smi peak over the idle level): $vram MiB"
    report ""
    [ $rc -eq 0 ] || fail=1
fi

# ---- the model ----
if stage synth; then
    if [ -f "$MODEL" ]; then
        say "model: $MODEL (kept from an earlier run)"
    else
        say "synth --preset $PRESET --type $TYPE"
        t0=$(date +%s)
        "$MOEX" synth --preset "$PRESET" --type "$TYPE" -t "$THREADS" -q -o "$MODEL.tmp" > "$LOGS/synth.log" 2>&1 &&
            mv "$MODEL.tmp" "$MODEL" || { echo "cuda-check: synth failed (logs/synth.log)" >&2; exit 1; }
        report "model: \`moex synth --preset $PRESET --type $TYPE\` in $(($(date +%s) - t0)) s"
    fi
fi

# ---- probe ----
if stage probe; then
    say "probe --device cuda"
    report "## moex probe --device cuda"
    report ""
    "$MOEX" probe --device cuda --shape 2048x768 --shape 768x2048 --m 1,8,16,64,512 > "$LOGS/probe.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then sed 's/^## .*//' "$LOGS/probe.log" >> "$OUT"
    else report "cannot probe: $(tail -1 "$LOGS/probe.log")"; fi
    report ""
fi

# ---- benchmarks ----
# The mean t/s of test $2 in a llama-bench style table.
rate_of() { # log test
    awk -F'|' -v test="$2" '{
        for (i = 2; i < NF; i++) { c = $i; gsub(/ /, "", c); if (c == test) { v = $(i + 1); sub(/^ */, "", v); split(v, a, " "); print a[1]; exit } }
    }' "$1"
}

# Bytes of the model's tensors: experts per layer (the largest layer's), the
# rest that llama.cpp puts on the GPU at -ngl 99 (all but token_embd).
model_sizes() {
    "$MOEX" info "$MODEL" 2> /dev/null | awk '
        $2 ~ /^blk\.[0-9]+\.ffn_(gate|up|down)_exps\.weight$/ { split($2, p, "."); e[p[2]] += $(NF - 1); next }
        $2 ~ /\.weight$|\.bias$/ && $2 != "token_embd.weight" { rest += $(NF - 1) }
        END { m = 0; n = 0; for (l in e) { n++; if (e[l] > m) m = e[l] } printf "%d %.0f %.0f\n", n, m, rest }'
}

results=$LOGS/results.txt # engine|setting|vram MiB|pp|tg|note
: > "$results"

bench_run() { # name setting log command...
    name=$1 setting=$2 log=$3; shift 3
    vram_sampler_start "$log.vram"
    "$@" > "$log" 2>&1
    rc=$?
    vram=$(vram_sampler_stop)
    pp=$(rate_of "$log" "pp$PP"); tg=$(rate_of "$log" "tg$TG")
    note=""
    [ $rc -eq 0 ] || note="exit $rc: $(tail -1 "$log" | cut -c1-120)"
    dn=$(grep -h 'note: device unavailable' "$log" | head -1 | sed 's/^moex: note: //' | cut -c1-140)
    [ -n "$dn" ] && note="$dn"
    echo "$name|$setting|$vram|${pp:--}|${tg:--}|$note" >> "$results"
    echo "   $name $setting: pp $pp tg $tg VRAM $vram MiB $note" >&2
}

# llama.cpp's own count of its device buffers, MiB: model + KV + compute,
# each the largest it printed (llama-bench makes a context per test).
llama_vram() {
    awk 'match($0, /CUDA0 (model|KV|compute) buffer size/) {
            k = $0; sub(/ buffer size.*/, "", k); sub(/.*CUDA0 /, "", k)
            for (i = 1; i <= NF; i++) if ($i == "=" && $(i + 1) + 0 > m[k]) m[k] = $(i + 1) + 0
         }
         END { for (k in m) s += m[k]; printf "%.0f\n", s }' "$1"
}

if stage bench; then
    [ -f "$MODEL" ] || { echo "cuda-check: no model at $MODEL (run the synth stage)" >&2; exit 2; }
    say "bench: $MODEL, $THREADS threads, pp$PP tg$TG, $REPS reps"
    sizes=$(model_sizes)
    n_layers=${sizes%% *} backbone=${sizes##* } layer_experts=${sizes#* }
    layer_experts=${layer_experts%% *}
    report "## pp$PP / tg$TG, $THREADS threads, $(basename "$MODEL"): $n_layers layers, experts $((layer_experts / 1048576)) MiB a layer, the rest $((backbone / 1048576)) MiB"
    report ""
    mb="$MOEX bench -m $MODEL -t $THREADS -p $PP -n $TG -r $REPS --no-roofline"
    bench_run moex "CPU only" "$LOGS/moex-cpu.log" $mb
    # once the executor says the device is unavailable (no GPU or driver
    # here), the other budgets would measure the CPU again: listed, not run
    unavailable=""
    for g in $BUDGETS 100%; do
        case $g in *%) budget=$g ;; *) budget=${g}G ;; esac
        if [ -n "$unavailable" ]; then
            echo "moex|--device cuda --hot-budget $budget|-|-|-|not run: $unavailable" >> "$results"
            continue
        fi
        bench_run moex "--device cuda --hot-budget $budget" "$LOGS/moex-cuda-$g.log" $mb --device cuda --hot-budget "$budget"
        grep -q 'note: device unavailable' "$LOGS/moex-cuda-$g.log" && unavailable="the device is unavailable to the executor (row above)"
    done
    if [ -n "$LLAMA_BENCH" ] && [ -x "$LLAMA_BENCH" ]; then
        lb="$LLAMA_BENCH -m $MODEL -t $THREADS -p $PP -n $TG -r $REPS -ngl 99 -v"
        bench_run llama.cpp "-ngl 99" "$LOGS/llama-all.log" $lb
        sed -i "\$s/^\(llama.cpp|-ngl 99|[^|]*\)|/\1 (own count $(llama_vram "$LOGS/llama-all.log"))|/" "$results"
        for g in $BUDGETS; do
            # the fewest layers' experts on the CPU whose buffers fit: from the
            # sizes (1 GiB left for KV, compute buffers and the context), then
            # one more layer while llama.cpp's own count is over the budget
            room=$((g * 1073741824 - backbone - 1073741824))
            on_gpu=$((room > 0 ? room / layer_experts : 0))
            n=$((n_layers - on_gpu)); [ $n -lt 0 ] && n=0
            tries=0
            while :; do
                log=$LOGS/llama-$g-ncmoe$n.log
                bench_run llama.cpp "-ngl 99 --n-cpu-moe $n" "$log" $lb --n-cpu-moe "$n"
                own=$(llama_vram "$log")
                sed -i "\$s/^\(llama.cpp|[^|]*|[^|]*\)|/\1 (own count $own)|/" "$results"
                tries=$((tries + 1))
                [ "$own" -le $((g * 1024)) ] || [ $n -ge "$n_layers" ] || [ $tries -ge 3 ] || { n=$((n + 1)); continue; }
                echo "llama.cpp|best fit ${g}G|--n-cpu-moe $n|$own" >> "$LOGS/llama-fits.txt"
                break
            done
        done
    else
        report "llama.cpp: LLAMA_BENCH not set (or not executable): no peer rows."
        report ""
    fi
    report "| engine | setting | VRAM used, MiB (nvidia-smi peak) | pp$PP t/s | tg$TG t/s | note |"
    report "|---|---|---:|---:|---:|---|"
    while IFS='|' read -r e s v p t n; do report "| $e | $s | $v | $p | $t | $n |"; done < "$results"
    report ""
    # moex against llama.cpp's best fitting setting at each budget, and against moex on the CPU
    cpu_pp=$(awk -F'|' '$1 == "moex" && $2 == "CPU only" { print $4 }' "$results")
    cpu_tg=$(awk -F'|' '$1 == "moex" && $2 == "CPU only" { print $5 }' "$results")
    for g in $BUDGETS all; do
        if [ "$g" = all ]; then ms="--device cuda --hot-budget 100%"; ls="-ngl 99"
        else ms="--device cuda --hot-budget ${g}G"; ls=$(awk -F'|' -v b="best fit ${g}G" '$2 == b { print $3 }' "$LOGS/llama-fits.txt" 2> /dev/null | tail -1)
            [ -n "$ls" ] && ls="-ngl 99 $ls"; fi
        awk -F'|' -v ms="$ms" -v ls="$ls" -v cpp="$cpu_pp" -v ctg="$cpu_tg" -v g="$g" '
            $1 == "moex" && $2 == ms { mp = $4; mt = $5; note = $6 }
            $1 == "llama.cpp" && $2 == ls { lp = $4; lt = $5 }
            END {
                r = "budget " g ": moex " ms;
                if (lp + 0 > 0 && mp + 0 > 0) r = r sprintf(" vs llama.cpp %s: pp %.2fx, tg %.2fx", ls, mp / lp, mt / lt);
                if (cpp + 0 > 0 && mp + 0 > 0) r = r sprintf("; vs moex CPU only: pp %.2fx, tg %.2fx", mp / cpp, mt / ctg);
                if (note != "") r = r " (moex: " note ")";
                print "- " r
            }' "$results" >> "$OUT"
    done
    report ""
fi

say "done; report in $OUT"
report "($(($(date +%s) - start)) s; logs in $LOGS)"
cat "$OUT"
exit $fail
