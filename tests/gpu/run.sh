#!/bin/bash
# Everything the GPU machine is for, in one device call: build against the CUDA LibTorch, run the
# gpu-labelled tests, then the benchmarks. Logs and JSON land in $OUT/results.tgz (the device tool
# returns at most 8 files), with the test log beside it.
# On the device: source .gpu/env.sh && bash tests/gpu/run.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-.}" && pwd)
out=${OUT:-/tmp/chronoserve-gpu}
work=/tmp/chronoserve-gpu-results
build=/tmp/chronoserve-build-gpu
rm -rf "$work" && mkdir -p "$work" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,persistence_mode --format=csv | tee "$work/gpu.txt"
SECONDS=0
if ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" 2>&1; then
  tail -40 "$work/cmake.log"; exit 1
fi
grep "chronoserve:" "$work/cmake.log"
targets=(chronoserve chronoserve-examples bench_serve_latency chronobench gpu_tests ${EXTRA_TARGETS:-})
if ! ninja -C "$build" "${targets[@]}" > "$work/build.log" 2>&1; then
  grep -E "error" "$work/build.log" | head -40; tail -20 "$work/build.log"; exit 1
fi
echo "build: ${SECONDS}s"
# SKIP_TESTS=1 skips the gpu suite (a benchmark-only call; the code it measures must have had a green
# suite in an earlier call).
tests_rc=0
if [ "${SKIP_TESTS:-0}" = 1 ]; then
  echo "gpu tests skipped (SKIP_TESTS=1)" | tee "$work/gpu_tests.log"
else
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300 > "$work/gpu_tests.log" 2>&1
  tests_rc=$?
  grep -E "tests passed|Passed|Failed|\*\*\*" "$work/gpu_tests.log" | tail -40
fi
bench_rc=0
# SKIP_BENCH=1 skips the default benchmarks; EXTRA_BENCH="benchmarks/x.sh ..." adds others.
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  bash "$src/benchmarks/run_serve_latency.sh" "$build" "$work" || bench_rc=1
  [ "${SKIP_CHRONOBENCH:-0}" = 1 ] || bash "$src/benchmarks/run_chronobench.sh" "$build" "$work" || bench_rc=1
fi
for extra in ${EXTRA_BENCH:-}; do bash "$src/$extra" "$build" "$work" || bench_rc=1; done
cp "$work/gpu_tests.log" "$out/"
tar czf "$out/results.tgz" -C "$work" .
echo "gpu tests rc=$tests_rc, benchmarks rc=$bench_rc, total ${SECONDS}s"
exit $(( tests_rc || bench_rc ))
