#!/bin/bash
# Run on your own (Debian) machine, in the project's root, before a device call that profiles with
# perf (run_streaming.sh's PERF_WORKER) or compares allocators (run_allocators.sh): the GPU machine
# has no perf and no package registry, so Debian's linux-perf and its libraries, jemalloc and
# tcmalloc travel as packages in .gpu/tools (git-ignored, carried with .gpu). On the device,
# `source benchmarks/perf_env.sh` unpacks them and puts perf on PATH.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
mkdir -p "$root/.gpu/tools"
cd "$root/.gpu/tools"
pkgs=(linux-perf libbabeltrace1 libcap2 libdw1 libelf1 libnuma1 libopencsd1 libperl5.36 libpython3.11
      libslang2 libunwind8 libglib2.0-0 libjemalloc2 libtcmalloc-minimal4)
if ! apt-get download "${pkgs[@]}" >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get download "${pkgs[@]}"
fi
du -sh "$root/.gpu/tools" | sed 's/^/staged for the GPU machine: /'
