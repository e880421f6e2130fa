#!/bin/bash
# Installs what chronoserve needs when it is missing (sourced by demo.sh and test.sh). Tested on
# Debian 12; other Debian and Ubuntu releases are untested.
# Usage: source scripts/deps.sh; install_deps [extra packages...]
install_deps() {
  local pkgs=(build-essential cmake ninja-build pkg-config
              libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
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

# True when DIR/node_modules was installed from DIR/package-lock.json as it is now: npm's record of
# what it installed (node_modules/.package-lock.json) lists the same packages, versions and hashes.
npm_installed_from_lock() {
  node -e '
    const fs = require("fs");
    const read = (f) => JSON.parse(fs.readFileSync(process.argv[1] + f, "utf8")).packages || {};
    const want = read("/package-lock.json"), have = read("/node_modules/.package-lock.json");
    delete want[""];  // the project itself
    const keys = Object.keys(want);
    const same = (k) => have[k] && want[k].version === have[k].version && want[k].integrity === have[k].integrity;
    process.exit(keys.length === Object.keys(have).length && keys.every(same) ? 0 : 1);
  ' "$1" 2>/dev/null
}

# What the tests need beyond the build: chromium (chronobench's HTML report is opened headless),
# node/npm and the test clients written by others (an OTLP receiver with @grpc/grpc-js and
# @opentelemetry/otlp-transformer; an external KServe v2 client using reflection).
install_test_deps() {
  local extra=()
  command -v npm >/dev/null || extra+=(nodejs npm)
  install_deps "${extra[@]}"
  # Debian packages Chromium as `chromium`; Ubuntu has only a snap shim, which apt cannot install in
  # a container. Without it the two tests that render the HTML report are skipped, nothing else.
  install_deps chromium ||
    echo "chromium could not be installed: the two HTML-report rendering tests will be skipped"
  # Without npm's registry the build and every other test still run; the tests that need these
  # clients then fail (OTLP) or skip (external client), each naming the missing packages.
  # npm ci deletes node_modules first, so it runs only when the lock file differs from what is
  # installed: a second run without the registry keeps a working install.
  local dir
  for dir in tests/telemetry/otlp_receiver tests/external_client; do
    npm_installed_from_lock "$dir" && continue
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error ||
      echo "WARNING: npm ci in $dir failed (no registry?): the tests that need its packages will fail or skip, naming them" >&2
  done
}

# Configures and builds into build/ (Release); extra args are ninja targets.
build_chronoserve() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -- "$@"
}
