#!/bin/bash
# Two builds against each other on benchmarks/run_cuda_shm_copies.sh (a batch of requests whose
# tensors are in CUDA or system shared memory: the worker's launch per batch, the h2d and d2h
# spans). Rounds alternate the order (base, new; new, base; ...) so that drift in the machine falls
# on both alike. Each run's table and worker lines go to OUT_DIR/VARIANT_N/ and are printed.
# Usage: BASE_BUILD=DIR benchmarks/run_cuda_shm_copies_ab.sh BUILD_DIR OUT_DIR [PORT]
# (run_ab_device.sh runs it with AB_SCRIPT=benchmarks/run_cuda_shm_copies_ab.sh). ROUNDS=2.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8081}
base=${BASE_BUILD:?BASE_BUILD: the build to compare with}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_lib.sh"  # round_order
mkdir -p "$out"
status=0
for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
  for variant in $(round_order "$round" base new); do
    dir=$build
    [ "$variant" = base ] && dir=$base
    echo "== round $round: $variant"
    bash "$here/run_cuda_shm_copies.sh" "$dir" "$out/${variant}_$round" "$port" || status=1
  done
done
echo "medians: see each round's table above (launch per batch: the worker lines)"
exit $status
