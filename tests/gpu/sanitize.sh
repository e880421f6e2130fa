#!/bin/bash
# The gpu suite under AddressSanitizer, on the GPU machine: our code (the CUDA path included) is
# instrumented, LibTorch, CUDA and gRPC are not. CUDA reserves the address range ASan's shadow gap
# would protect, hence protect_shadow_gap=0. The log lands in $OUT/gpu_asan.log.
# On the device: source .gpu/env.sh && bash tests/gpu/sanitize.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-.}" && pwd)
out=${OUT:-/tmp/chronoserve-gpu}
build=/tmp/chronoserve-build-gpu-asan
mkdir -p "$out"
SECONDS=0
if ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="-O1 -g1 -fsanitize=address -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" > "$out/gpu_asan_cmake.log" 2>&1; then
  tail -40 "$out/gpu_asan_cmake.log"; exit 1
fi
if ! ninja -C "$build" chronoserve chronoserve-examples gpu_tests > "$out/gpu_asan_build.log" 2>&1; then
  grep -E "error" "$out/gpu_asan_build.log" | head -40; exit 1
fi
echo "asan build: ${SECONDS}s"
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:${ASAN_OPTIONS:-}"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600 > "$out/gpu_asan.log" 2>&1
rc=$?
grep -E "tests passed|Failed|\*\*\*|ERROR: AddressSanitizer" "$out/gpu_asan.log" | tail -40
echo "gpu asan rc=$rc, total ${SECONDS}s"
exit $rc
