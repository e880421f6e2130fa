#!/bin/bash
# One device call comparing this tree with another commit (benchmarks/run_ab.sh). On your machine
# first: `git archive --format=tar.gz -o .gpu/base.tar.gz REV` (and benchmarks/stage_perf.sh for
# PERF_ROUND); then the device command, carrying [".gpu"]: `bash benchmarks/run_ab_device.sh`.
# Builds both trees (Release, the server, examples, chronobench and the in-process reference), runs
# run_ab.sh (its environment: ROUNDS, FORWARDS, PERF_ROUND, ...) and leaves OUT/ab.log and
# OUT/ab.tgz ($OUT, else /tmp/chronoserve-ab).
set -uo pipefail
out=${OUT:-/tmp/chronoserve-ab}
mkdir -p "$out"
source .gpu/env.sh
[ -d .gpu/tools ] && source benchmarks/perf_env.sh
SECONDS=0
targets=(chronoserve chronoserve-examples chronobench bench_inprocess_throughput)
build() {  # SRC BUILD
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$2.cmake.log" 2>&1 || { tail -30 "$2.cmake.log"; return 1; }
  ninja -C "$2" "${targets[@]}" > "$2.build.log" 2>&1 || { grep error "$2.build.log" | head -30; return 1; }
}
[ -f .gpu/base.tar.gz ] || { echo "no .gpu/base.tar.gz: git archive the commit to compare with"; exit 2; }
rm -rf /tmp/ab-base-src && mkdir -p /tmp/ab-base-src && tar xzf .gpu/base.tar.gz -C /tmp/ab-base-src
build . /tmp/ab-new || exit 1
build /tmp/ab-base-src /tmp/ab-base || exit 1
echo "builds: ${SECONDS}s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
BASE_BUILD=/tmp/ab-base bash benchmarks/run_ab.sh /tmp/ab-new "$out/ab" > "$out/ab.log" 2>&1
status=$?
echo "run_ab.sh rc=$status, total ${SECONDS}s"
grep -A30 "^medians" "$out/ab.log"
tar czf "$out/ab.tgz" -C "$out" ab ab.log && rm -rf "$out/ab"
exit $status
