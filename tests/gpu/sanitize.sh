#!/bin/bash
# A suite under AddressSanitizer on the GPU machine: our code (the CUDA path included) is
# instrumented, LibTorch, CUDA and gRPC are not. CUDA reserves the address range ASan's shadow gap
# would protect, hence protect_shadow_gap=0. The log lands in $OUT/${SUITE}_asan.log.
#   SUITE=gpu (default): the gpu suite.
#   SUITE=cpu: the CPU suite (what scripts/sanitize.sh runs on the 2-core VM in about 40 minutes),
#     with UndefinedBehaviorSanitizer too, on this machine's 16 cores, with the GPUs hidden
#     (CUDA_VISIBLE_DEVICES=) so LibTorch sees none, as on CI. This machine has no node, so the
#     tests that need it skip, and three of chronobench's --html cases fail (no Chart.js there);
#     the summary lists sanitizer reports apart from failures. (The metrics tests failed there
#     before the stack floor of server/telemetry/thread_stack_floor.h: BENCHMARKS §67.)
# On the device: source .gpu/env.sh && [SUITE=cpu] bash tests/gpu/sanitize.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-.}" && pwd)
out=${OUT:-/tmp/chronoserve-gpu}
suite=${SUITE:-gpu}
mkdir -p "$out"
SECONDS=0
sanitizers=address
targets=(chronoserve chronoserve-examples gpu_tests)
if [ "$suite" = cpu ]; then
  sanitizers=address,undefined
  targets=()  # everything
  export CUDA_VISIBLE_DEVICES=
fi
build=/tmp/chronoserve-build-$suite-asan
# The same flags as scripts/sanitize.sh, CMAKE_CXX_FLAGS_DEBUG emptied so its -g does not override -g1.
if ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="" \
    -DCMAKE_CXX_FLAGS="-O1 -g1 -fsanitize=$sanitizers -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=$sanitizers" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=$sanitizers" \
    > "$out/${suite}_asan_cmake.log" 2>&1; then
  tail -40 "$out/${suite}_asan_cmake.log"; exit 1
fi
if ! ninja -C "$build" "${targets[@]}" > "$out/${suite}_asan_build.log" 2>&1; then
  grep -E "error" "$out/${suite}_asan_build.log" | head -40; exit 1
fi
echo "$suite asan build: ${SECONDS}s"
export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
ctest --test-dir "$build" -L "$suite" --output-on-failure --timeout 600 -j "$([ "$suite" = cpu ] && nproc || echo 1)" \
  > "$out/${suite}_asan.log" 2>&1
rc=$?
grep -E "tests passed|Failed|\*\*\*" "$out/${suite}_asan.log" | tail -40
echo "sanitizer reports: $(grep -cE 'ERROR: AddressSanitizer|runtime error:' "$out/${suite}_asan.log")"
grep -E -A12 'ERROR: AddressSanitizer|runtime error:' "$out/${suite}_asan.log" | head -60
echo "$suite asan rc=$rc, total ${SECONDS}s"
exit $rc
