#!/bin/bash
# Installs what chronoserve needs on Debian 12 / Ubuntu when it is missing (sourced by demo.sh and
# test.sh). Usage: source scripts/deps.sh; install_deps [extra packages...]
install_deps() {
  local pkgs=(build-essential cmake ninja-build pkg-config
              libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
              libtorch-dev libgtest-dev libgmock-dev libcli11-dev prometheus-cpp-dev libcivetweb-dev
              nlohmann-json3-dev libjs-chart.js "$@")
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      if ! command -v sudo >/dev/null; then
        echo "installing packages needs root: run this as root, or install sudo" >&2
        return 1
      fi
      sudo="sudo"
    fi
    $sudo apt-get update -qq
    # Through env: sudo resets the environment, so a DEBIAN_FRONTEND set before it would be lost.
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# What the tests need beyond the build: chromium (chronobench's HTML report is opened headless),
# node/npm and the test clients written by others (an OTLP receiver with @grpc/grpc-js and
# @opentelemetry/otlp-transformer; an external KServe v2 client using reflection).
install_test_deps() {
  local extra=()
  command -v npm >/dev/null || extra+=(nodejs npm)
  install_deps "${extra[@]}"
  # Debian packages Chromium as `chromium`; Ubuntu has only a snap shim, which apt cannot install in
  # a container. Without it the one test that renders the HTML report is skipped, nothing else.
  install_deps chromium ||
    echo "chromium could not be installed: the HTML-report rendering test will be skipped"
  # Without npm's registry the build and every other test still run; the tests that need these
  # clients then fail (OTLP) or skip (external client), each naming the missing packages.
  local dir
  for dir in tests/telemetry/otlp_receiver tests/external_client; do
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error ||
      echo "WARNING: npm ci in $dir failed (no registry?): the tests that need its packages will fail or skip, naming them" >&2
  done
}

# Configures and builds into build/ (Release); extra args are ninja targets.
build_chronoserve() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -- "$@"
}
