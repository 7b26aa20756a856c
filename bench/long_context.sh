#!/usr/bin/env bash
# long_context.sh: attention over long sequences (issue 15, target 5): the training step and
# peak activation memory of a 2-layer encoder (128 wide, 4 heads, no dropout: bench/
# long_context.yaml) at sequence lengths 128..2048, through the fused attention route
# (scaled_dot_product_attention: no [S, S] tensor) and the unfused one (matmul, softmax, matmul),
# chosen with MIXPREC_ATTENTION_FUSED_FROM; and beside them PyTorch 1.13 on the same model
# (bench/long_context_torch.py: step time and the growth of its peak resident memory during
# the steps), when Debian's python3-torch is installed. Same batch at every length. The peer
# runs through bench/peer_python (OpenBLAS on its own kernels: OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE removed) after a check of its GEMMs against float64 (bench/peer_check.py).
#
#   bench/long_context.sh [--build-dir build-dev] [--batch-size 4] [--lengths 128,256,512,1024,2048]
#       [--precision amp-bf16] [--steps 3]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev BATCH=4 LENGTHS=128,256,512,1024,2048 PRECISION=amp-bf16 STEPS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "long_context.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
MODEL=$ROOT/bench/long_context.yaml
echo "# Long context: $PRECISION, batch $BATCH, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(date -u +%FT%TZ)"
echo
TORCH=0
/usr/bin/python3 -c "import torch" 2> /dev/null && TORCH=1
header="| length | fused step ms | fused peak activations | unfused step ms | unfused peak activations |"
rule="|---|---|---|---|---|"
if ((TORCH)); then header+=" PyTorch step ms | PyTorch peak RSS growth |"; rule+="---|---|"; fi
echo "$header"
echo "$rule"
IFS=, read -ra lengths <<< "$LENGTHS"
for T in "${lengths[@]}"; do
  row="| $T"
  for from in 1 1000000000; do
    line=$(MIXPREC_ATTENTION_FUSED_FROM=$from "$BIN" bench --model "$MODEL" --input "$T" --precision "$PRECISION" \
      --batch-size "$BATCH" --steps "$STEPS" --warmup 1 2>&1 | grep -E "^$PRECISION " || true)
    [[ -n $line ]] || { echo "long_context.sh: bench failed at length $T" >&2; exit 1; }
    row+=" | $(awk -F'|' '{gsub(/ /, "", $2); print $2}' <<< "$line") | $(awk -F'|' '{gsub(/^ +| +$/, "", $7); print $7}' <<< "$line")"
  done
  if ((TORCH)); then
    result=$("$ROOT/bench/peer_python" "$ROOT/bench/long_context_torch.py" --length "$T" --batch-size "$BATCH" --steps "$STEPS" \
      --precision "$([[ $PRECISION == fp32 ]] && echo fp32 || echo amp-bf16)" | grep '^RESULT length=' || true)
    row+=" | $(grep -o 'step_ms=[0-9.]*' <<< "$result" | cut -d= -f2) | $(grep -o 'rss_growth_mib=[0-9.]*' <<< "$result" | cut -d= -f2) MiB"
  fi
  echo "$row |"
done
