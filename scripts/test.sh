#!/bin/bash
# Installs what is missing, builds, and runs every CPU test (CTest label "cpu").
# GPU tests run on a CUDA machine with tests/gpu/run.sh (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
install_test_deps
SECONDS=0
build_chronoserve
echo "build: ${SECONDS}s"
ctest --test-dir build -L cpu --output-on-failure --timeout 600 -j "$(nproc)"
