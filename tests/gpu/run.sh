#!/bin/bash
# Everything the GPU machine is for, in one device call: build against the CUDA LibTorch, run the
# gpu-labelled tests, then the serving benchmark. Results land in $OUT (or /tmp/chronoserve-gpu).
# On the device: source .gpu/env.sh && bash tests/gpu/run.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-.}" && pwd)
out=${OUT:-/tmp/chronoserve-gpu}
build=/tmp/chronoserve-build-gpu
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,persistence_mode --format=csv | tee "$out/gpu.txt"
SECONDS=0
if ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/cmake.log" 2>&1; then
  tail -40 "$out/cmake.log"; exit 1
fi
grep "chronoserve:" "$out/cmake.log"
if ! ninja -C "$build" chronoserve chronoserve-examples bench_serve_latency gpu_tests > "$out/build.log" 2>&1; then
  grep -E "error" "$out/build.log" | head -40; tail -20 "$out/build.log"; exit 1
fi
echo "build: ${SECONDS}s"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300 > "$out/gpu_tests.log" 2>&1
tests_rc=$?
tail -25 "$out/gpu_tests.log"
bash "$src/benchmarks/run_serve_latency.sh" "$build" "$out"
bench_rc=$?
echo "gpu tests rc=$tests_rc, benchmark rc=$bench_rc, total ${SECONDS}s"
exit $(( tests_rc || bench_rc ))
