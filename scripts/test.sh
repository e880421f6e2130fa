#!/bin/bash
# Installs what is missing, builds, and runs every CPU test (CTest label "cpu").
# GPU tests run on a CUDA machine with tests/gpu/run.sh (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
# chromium: chronobench's HTML report is opened headless; node/npm: the OTLP receiver in
# tests/telemetry is written with @grpc/grpc-js and @opentelemetry/otlp-transformer.
extra=(chromium)
command -v npm >/dev/null || extra+=(nodejs npm)
install_deps "${extra[@]}"
# Test clients written by others: an OTLP receiver and an external KServe v2 client (reflection).
npm ci --prefix tests/telemetry/otlp_receiver --no-audit --no-fund --loglevel=error
npm ci --prefix tests/external_client --no-audit --no-fund --loglevel=error
SECONDS=0
build_chronoserve
echo "build: ${SECONDS}s"
ctest --test-dir build -L cpu --output-on-failure --timeout 600 -j "$(nproc)"
