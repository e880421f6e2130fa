#!/bin/bash
# One device call comparing this tree with another commit (benchmarks/run_ab.sh). On your machine
# first: `git archive --format=tar.gz -o .gpu/base.tar.gz REV` (and benchmarks/stage_perf.sh for
# PERF_ROUND); then the device command, carrying [".gpu"]: `bash benchmarks/run_ab_device.sh`.
# Builds both trees (Release, the server, examples, chronobench and the in-process reference), runs
# run_ab.sh (its environment: ROUNDS, FORWARDS, PERF_ROUND, ...) and leaves OUT/ab.log and
# OUT/ab.tgz ($OUT, else /tmp/chronoserve-ab). MICRO_BENCH=TARGET (with MICRO_ARGS) also builds a
# benchmark binary in both trees and runs it first, base / new / base / new, into OUT/micro.log
# and OUT/micro_{base,new}_N.json (e.g. MICRO_BENCH=bench_request_accounting; the base tree must
# have it too). SKIP_AB=1 runs only that. AB_SCRIPT (default benchmarks/run_ab.sh, throughput at
# concurrency 256) picks the comparison: benchmarks/run_latency_ab.sh compares concurrency 1
# (it needs AB_TARGETS=bench_serve_latency, built in both trees).
set -uo pipefail
out=${OUT:-/tmp/chronoserve-ab}
mkdir -p "$out"
source .gpu/env.sh
[ -d .gpu/tools ] && source benchmarks/perf_env.sh
SECONDS=0
targets=(chronoserve chronoserve-examples chronobench bench_inprocess_throughput ${MICRO_BENCH:-} ${AB_TARGETS:-})
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
status=0
if [ -n "${MICRO_BENCH:-}" ]; then
  for n in 1 2; do
    for variant in base new; do
      echo "== $MICRO_BENCH, $variant, run $n" | tee -a "$out/micro.log"
      # shellcheck disable=SC2086  # MICRO_ARGS is a list of arguments
      "/tmp/ab-$variant/bin/$MICRO_BENCH" ${MICRO_ARGS:-} --json "$out/micro_${variant}_$n.json" 2>&1 \
        | tee -a "$out/micro.log" || status=1
    done
  done
fi
[ "${SKIP_AB:-0}" = 1 ] && exit $status
ab_script=${AB_SCRIPT:-benchmarks/run_ab.sh}
BASE_BUILD=/tmp/ab-base bash "$ab_script" /tmp/ab-new "$out/ab" > "$out/ab.log" 2>&1 || status=1
echo "$ab_script rc=$status, total ${SECONDS}s"
grep -A30 "^medians" "$out/ab.log"
tar czf "$out/ab.tgz" -C "$out" ab ab.log && rm -rf "$out/ab"
exit $status
