#!/bin/bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ (or
# $ASAN_BUILD_DIR) and runs the CPU suite under them: a use after free, a read past a buffer or a
# dead stack frame, or undefined behaviour (signed overflow, a misaligned load, a bad shift...) in
# our code fails its test with the sanitizer's report (our code is instrumented; LibTorch and gRPC
# are not, so their own bugs are not seen).
# Not part of CI: the instrumented build takes about 25 minutes on 2 cores. Run it after changing
# object lifetimes, threads or shutdown. It found the synthetic inputs that read a dead stack frame
# (InputTensor::Own).
# Usage: scripts/sanitize.sh [ctest arguments, e.g. -R ShutdownUnderLoad]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_test_deps
build=${ASAN_BUILD_DIR:-build-asan}
# CMAKE_CXX_FLAGS_DEBUG emptied: its -g would come after -g1 and win (full debug info, a larger and
# slower build).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="" \
  -DCMAKE_CXX_FLAGS="-O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build"
# The first error ends its test process, so the test fails. Leaks are not checked: LibTorch and gRPC
# keep process-lifetime allocations that LeakSanitizer reports.
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
ctest --test-dir "$build" -L cpu --output-on-failure --timeout 1800 -j "$(nproc)" "$@"
