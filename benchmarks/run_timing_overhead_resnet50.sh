#!/bin/bash
# What request timing costs for a GPU-bound model: ResNet-50 (torchvision's architecture, random
# weights, exported with the machine's PyTorch by benchmarks/resnet50/export_resnet50.py; CUDA graphs
# for batch 1 and 8, max_batch_size 8, delay 0) served with --request-timing on and off, through
# benchmarks/run_timing_overhead.sh (alternating rounds, closed loop, plus the in-process on / off).
# Skips (exit 0) without torchvision.
# Usage: benchmarks/run_timing_overhead_resnet50.sh BUILD_DIR OUT_DIR [PORT]
# Environment: POINTS="16:1 4:8" (concurrency:batch), INPROCESS_BATCH_SIZES=1,8, WINDOW_MS=2000,
#   TRIALS=4, ROUNDS=2, INPROCESS_ROUNDS=2, INPROCESS_ITERATIONS=300 and run_timing_overhead.sh's others.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8023}
here=$(cd "$(dirname "$0")" && pwd)
python3 -c "import torch, torchvision" 2>/dev/null || { echo "run_timing_overhead_resnet50: no torchvision here; skipped"; exit 0; }
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
python3 "$here/resnet50/export_resnet50.py" "$repo" --graphs 1,8 || exit 1
mkdir -p "$out/timing_resnet50"
REPOSITORY="$repo" MODEL=resnet50 POINTS="${POINTS:-16:1 4:8}" INPROCESS_BATCH_SIZES="${INPROCESS_BATCH_SIZES:-1,8}" \
  WINDOW_MS="${WINDOW_MS:-2000}" TRIALS="${TRIALS:-4}" ROUNDS="${ROUNDS:-2}" INPROCESS_ROUNDS="${INPROCESS_ROUNDS:-2}" \
  INPROCESS_ITERATIONS="${INPROCESS_ITERATIONS:-300}" \
  bash "$here/run_timing_overhead.sh" "$build" "$out/timing_resnet50" "$port"
