#!/bin/sh
# The RK3588 board model (moex bench --device sim --sim rk3588,board=1) on
# cut-down synth models of the two families NPU-FACTS.md measured: the
# board's configurations, then moex's own placement. Writes markdown rows.
#   sh bench/board.sh build/moex DIR    (DIR: where the models are made, ~1 GB)
# The files hold one layer of each kind that matters; the board figures
# *_layers and vocab scale each kind's modelled time to the full model.
set -e
MOEX=${1:-build/moex}
DIR=${2:-/tmp/moex-board}
mkdir -p "$DIR"
Q="$DIR/q35-l1.gguf"
L="$DIR/lfm-l4.gguf"
# Qwen3-35B-A3B class: qwen3moe, 128 experts top-8 of 2048 x 512, 48 layers (1 made)
[ -f "$Q" ] || "$MOEX" synth -q -o "$Q" --preset q30b --layers 1 --expert-ffn 512 --vocab 4096
# LFM2-8B-A1B: conv+dense, conv+dense, attention+MoE, conv+MoE (4 of its 24 layers)
[ -f "$L" ] || "$MOEX" synth -q -o "$L" --preset lfm2-8b-a1b --layers 4 --vocab 4096
QS="rk3588,board=1,moe_layers=48,attn_layers=48,vocab=151936"
LS="rk3588,board=1,attn_layers=6,conv_layers=18,dense_layers=2,moe_layers=22,vocab=65536"

# row LABEL MODEL PP TG SIM [moex options...]: "| LABEL | ppPP t/s | tgTG t/s |"
row() {
    label=$1 model=$2 pp=$3 tg=$4 sim=$5
    shift 5
    out=$("$MOEX" bench -m "$model" --device sim --sim "$sim" -p "$pp" -n "$tg" -r 1 --no-roofline "$@" 2>/dev/null)
    p=$(echo "$out" | awk -F'|' -v t="pp$pp" '$7 ~ t { split($8, a, " "); print a[1] }')
    g=$(echo "$out" | awk -F'|' -v t="tg$tg" '$7 ~ t { split($8, a, " "); print a[1] }')
    echo "| $label | $p | $g |"
}

echo "| Qwen3-35B-A3B class | pp128 t/s | tg16 t/s |"
echo "|---|---:|---:|"
row "CPU only" "$Q" 128 16 "$QS" --hot-budget 0
row "legacy: one submit per expert" "$Q" 128 16 "$QS,legacy=1,mode=single" --hot-budget 0
row "legacy: 8 chained per submit" "$Q" 128 16 "$QS,legacy=1,mode=chain,chain=8" --hot-budget 0
row "legacy: + SIMD repack (4.2 ms an expert)" "$Q" 128 16 "$QS,legacy=1,mode=chain,chain=8,legacy_pack_ns=1.34" --hot-budget 0
row "legacy: + fused pack (3.1 ms an expert)" "$Q" 128 16 "$QS,legacy=1,mode=chain,chain=8,legacy_pack_ns=0.99" --hot-budget 0
row "moex: experts 20% (the window), M>=8, stream, overlap" "$Q" 128 16 "$QS" --hot-budget 20%
row "moex: the same, no overlap" "$Q" 128 16 "$QS" --hot-budget 20% --no-overlap
row "moex: the same, M>=4" "$Q" 128 16 "$QS" --hot-budget 20% --min-m 4
row "moex: the same, M>=16" "$Q" 128 16 "$QS" --hot-budget 20% --min-m 16
row "moex: the same, chain=8" "$Q" 128 16 "$QS,mode=chain,chain=8" --hot-budget 20%
row "moex: the same, resident experts at M>=1" "$Q" 128 16 "$QS" --hot-budget 20% --min-m 1
row "moex: backbone resident, experts 15% (window less backbone)" "$Q" 128 16 "$QS" --hot-budget 15%
row "moex: backbone resident, experts 15%, M>=1" "$Q" 128 16 "$QS" --hot-budget 15% --min-m 1
row "moex: domains=5, backbone resident, every expert resident" "$Q" 128 16 "$QS,domains=5" --hot-budget 100%
row "moex: experts 20%, priced as the rknpu device's programs" "$Q" 128 16 "$QS,mode=programs" --hot-budget 20%
for gmacs in 50 200 400; do
    row "moex: experts 20%, NPU at $gmacs GMAC/s a core (100 assumed)" "$Q" 128 16 "$QS,core_gmacs=$gmacs" --hot-budget 20%
done
echo
echo "| LFM2-8B-A1B | pp64 t/s | tg64 t/s |"
echo "|---|---:|---:|"
row "CPU only" "$L" 64 64 "$LS" --hot-budget 0
row "legacy: 4 hot experts per layer, cold as GEMVs" "$L" 64 64 "$LS,legacy=1,hot=4,mode=chain,chain=8" --hot-budget 0
row "moex: experts 50% (the window), M>=8, stream, overlap" "$L" 64 64 "$LS" --hot-budget 50%
row "moex: the same, no overlap" "$L" 64 64 "$LS" --hot-budget 50% --no-overlap
row "moex: the same, M>=4" "$L" 64 64 "$LS" --hot-budget 50% --min-m 4
row "moex: the same, M>=16" "$L" 64 64 "$LS" --hot-budget 50% --min-m 16
row "moex: the same, resident experts at M>=1" "$L" 64 64 "$LS" --hot-budget 50% --min-m 1
row "moex: backbone resident, experts 45% (window less backbone)" "$L" 64 64 "$LS" --hot-budget 45%
row "moex: backbone resident, experts 45%, M>=1" "$L" 64 64 "$LS" --hot-budget 45% --min-m 1
row "moex: domains=2, backbone resident, every expert resident" "$L" 64 64 "$LS,domains=2" --hot-budget 100%
row "moex: experts 50%, priced as the rknpu device's programs" "$L" 64 64 "$LS,mode=programs" --hot-budget 50%
for gmacs in 50 200 400; do
    row "moex: experts 50%, NPU at $gmacs GMAC/s a core (100 assumed)" "$L" 64 64 "$LS,core_gmacs=$gmacs" --hot-budget 50%
done
