#!/bin/bash
# How the cost of an idle spell grows with its length (issue 6's "1 s idle / back to back"): for
# each gap in GAPS (ms), round trips after that much idle time, p50 µs: a raw 64-byte ping-pong
# between two threads over TCP loopback and a Unix socket pair (no gRPC: the host's own wake-up),
# gRPC ServerLive over the server's Unix socket, and the policy net at batch 128 (CUDA graphs,
# keep-warm 10 ms, tensors in system shared memory) through bench_serve_latency over the same
# socket; back to back first for reference. Writes idle_sweep.json.
# Usage: benchmarks/run_idle_sweep.sh BUILD_DIR OUT_DIR [PORT]
# Environment (defaults): GAPS="2 10 100 1000" IDLE_REQUESTS=10
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8071}
gaps=${GAPS:-2 10 100 1000}
idle_requests=${IDLE_REQUESTS:-10}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
warm_graph_workspace "$build" || exit 1
status=0
start_server "$build" "$models" "$out/server-idle-sweep.log" "$port" --grpc-unix-socket "$socket_path" || exit 1
infer() {  # infer LABEL ARGS...
  local label=$1
  shift
  "$build/bin/bench_serve_latency" -u "unix:$socket_path" -m policy_net --shared-memory system -b 128 "$@" \
    --label "$label" --json "$out/idle_sweep_infer_$label.json" > /dev/null || status=1
}
infer b2b -n 1000 --warmup-requests 100
for gap in $gaps; do
  "$build/bin/bench_grpc_floor" -u "unix:$socket_path" --raw-sockets -n 200 --warmup-requests 50 \
    --idle-requests "$idle_requests" --idle-gap-ms "$gap" --json "$out/idle_sweep_floor_$gap.json" > /dev/null || status=1
  infer "gap$gap" -n "$idle_requests" --warmup-requests 5 --idle-gap-ms "$gap"
done
stop_server || status=1

python3 - "$out" "$gaps" <<'PY' || status=1
import json, sys
out, gaps = sys.argv[1], [int(g) for g in sys.argv[2].split()]
def infer(label):
    return {k: v["p50"] for k, v in json.load(open(f"{out}/idle_sweep_infer_{label}.json"))["latency_us"].items()}
def floor(gap):
    rows = {}
    for s in json.load(open(f"{out}/idle_sweep_floor_{gap}.json"))["series"]:
        kind = "live" if s["path"].startswith("gRPC") else ("raw_tcp" if "TCP" in s["path"] else "raw_unix")
        rows[(kind, "b2b" if s["mode"] == "back_to_back" else "idle")] = s["p50_us"]
    return rows
b2b = infer("b2b")
first = floor(gaps[0])
print(f"{'gap ms':>7}{'raw TCP':>9}{'raw unix':>9}{'gRPC live':>10}{'infer e2e':>10}{'transport':>10}{'server':>8}"
      f"{'queue':>7}{'h2d':>6}{'compute':>8}{'infer / b2b':>12}")
print(f"{'b2b':>7}{first[('raw_tcp', 'b2b')]:>9.0f}{first[('raw_unix', 'b2b')]:>9.0f}{first[('live', 'b2b')]:>10.0f}"
      f"{b2b['e2e']:>10.0f}{b2b['transport']:>10.0f}{b2b['server_total']:>8.0f}{b2b['queue']:>7.0f}{b2b['h2d']:>6.0f}"
      f"{b2b['compute']:>8.0f}{1:>12.2f}")
summary = {"back_to_back": b2b, "gaps": {}}
for gap in gaps:
    f, i = floor(gap), infer(f"gap{gap}")
    summary["gaps"][gap] = {"raw_tcp_p50_us": f[("raw_tcp", "idle")], "raw_unix_p50_us": f[("raw_unix", "idle")],
                            "grpc_live_p50_us": f[("live", "idle")], "infer": i, "infer_over_b2b": i["e2e"] / b2b["e2e"]}
    print(f"{gap:>7}{f[('raw_tcp', 'idle')]:>9.0f}{f[('raw_unix', 'idle')]:>9.0f}{f[('live', 'idle')]:>10.0f}"
          f"{i['e2e']:>10.0f}{i['transport']:>10.0f}{i['server_total']:>8.0f}{i['queue']:>7.0f}{i['h2d']:>6.0f}"
          f"{i['compute']:>8.0f}{i['e2e'] / b2b['e2e']:>12.2f}")
json.dump(summary, open(f"{out}/idle_sweep.json", "w"), indent=2)
PY
exit $status
