#!/bin/bash
# Where `admit` goes (docs/TIMING.md: received by the handler -> enqueued; BENCHMARKS §45): the
# server under perf while bench_serve_latency sends the policy net at batch 128, concurrency 1.
# Reports the CPU time per request of the threads that receive and answer requests (the
# asynchronous API's `cs-grpc-cq*` threads: they read each request, validate it, copy its input
# into the arena and enqueue it, then later serialise its response), by symbol and by shared
# object, beside the bench's own span table (admit, handback, ...). Needs perf on PATH (the GPU
# machine: benchmarks/stage_perf.sh here, `source benchmarks/perf_env.sh` there).
#
# Usage: benchmarks/run_admit_profile.sh BUILD_DIR OUT_DIR [PORT]
# Environment: BATCH=128 REQUESTS=3000 PERF_HZ=4999 FORWARD=graphs|eager (graphs: on a GPU only)
#              TOP=30 SERVER_FLAGS="" (extra chronoserve flags)
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8001}
batch=${BATCH:-128}
requests=${REQUESTS:-3000}
hz=${PERF_HZ:-4999}
command -v perf >/dev/null || { echo "no perf on PATH"; exit 2; }
mkdir -p "$out"
source "$(dirname "$0")/server_lib.sh"
scratch_dir work
"$build/bin/chronoserve-examples" --out "$work/models" >/dev/null || exit 1
[ "${FORWARD:-graphs}" = graphs ] && printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$work/models/policy_net/config.pbtxt"
# shellcheck disable=SC2086
start_server "$build" "$work/models" "$out/admit_server.log" "$port" ${SERVER_FLAGS:-} || exit 1
status=0
# Warm the connection path first (not sampled), then sample the whole server over the measured run.
"$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b "$batch" -n 200 --warmup-requests 50 \
  > /dev/null || status=1
# perf itself in the background (not a subshell: SIGTERM must reach it; it then writes its data).
perf record -q -F "$hz" -p "$server" -o "$work/admit.perf.data" 2>/dev/null &
perf_pid=$!
sleep 1  # perf attached (it samples the idle server meanwhile: no request runs)
"$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b "$batch" -n "$requests" \
  --warmup-requests 0 --label "policy_net bs$batch under perf" --json "$out/admit_profile_latency.json" \
  > "$out/admit_profile_latency.txt" 2>&1 || status=1
kill -TERM "$perf_pid"
wait "$perf_pid"
cat "$out/admit_profile_latency.txt"
stop_server || status=1
perf report -i "$work/admit.perf.data" --stdio -n --no-children --sort comm,dso,sym -g none 2>/dev/null \
  | grep -v '^#' | grep -v '^$' > "$out/admit_profile.perf.txt"
python3 - "$out/admit_profile.perf.txt" "$requests" "$hz" "${TOP:-30}" <<'PY' | tee "$out/admit_profile.txt" || status=1
import collections, re, sys
path, requests, hz, top = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
# "  12.34%   5678  cs-grpc-cq0  libc.so.6  [.] __memmove_avx_unaligned_erms": percent, samples, thread, dso, symbol
line = re.compile(r"^\s*([0-9.]+)%\s+(\d+)\s+(\S+)\s+(\S+)\s+\[.\]\s+(.*?)\s*$")
by_thread, by_sym, by_dso = collections.Counter(), collections.Counter(), collections.Counter()
for text in open(path):
    m = line.match(text)
    if not m:
        continue
    n, thread, dso, sym = int(m[2]), m[3], m[4], m[5]
    group = re.sub(r"\d+$", "*", thread)
    by_thread[group] += n
    if group == "cs-grpc-cq*":
        by_sym[f"{dso} {sym}"] += n
        by_dso[dso] += n
us = lambda n: n / hz / requests * 1e6  # CPU µs per request (samples at hz while the thread runs)
print(f"CPU us per request by thread ({requests} requests, {hz:.0f} Hz):")
for group, n in by_thread.most_common(12):
    print(f"  {us(n):>8.1f}  {group}")
print("the receiving threads (cs-grpc-cq*) by shared object:")
for dso, n in by_dso.most_common(10):
    print(f"  {us(n):>8.1f}  {dso}")
print(f"the receiving threads by symbol (top {top}):")
for sym, n in by_sym.most_common(top):
    print(f"  {us(n):>8.1f}  {sym[:120]}")
PY
exit $status
