#!/bin/bash
# Shared memory vs the message path on the GPU machine (issue 6 ratios): the policy net with CUDA
# graphs and keep-warm (10 ms), one fresh server per transport so that "first" is the first request
# after READY; then back to back at batch 128 and 1, and 1 s idle gaps at batch 128. Plus the
# in-process graph reference (bench_inprocess_throughput --one-request) in the same run.
# "first" is measured twice, each on its own fresh server: from a fresh client process (its own
# cold start included), and from a client process first warmed on another server of the same
# model (--warm-client-requests): that one pays only the server's and the new connection's costs.
# A third "first" (first_no_sw) is from a server started with --serving-warmup-requests 0: the
# first request without the server's serving warm-up, for comparison in the same run.
# Prints e2e - GPU spans, first / steady and idle / back-to-back for every transport; JSON per run.
# Transports (TRANSPORTS, default "none system cuda"): the message, system shared memory, and CUDA
# shared memory (the client's GPU memory through CUDA IPC: bench_serve_latency built with CUDA).
# For the shared-memory ones, call - GPU spans (the gRPC call without the client's copies) too.
# Usage: [TRANSPORTS="none system cuda"] benchmarks/run_shared_memory.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8051}
transports=${TRANSPORTS:-none system cuda}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
models=$(mktemp -d)
write_warm_graph_repo "$build" "$models" || exit 1
status=0
"$build/bin/bench_inprocess_throughput" --model-repository "$models" -m policy_net --batch-sizes 1,128 --one-request \
  --json "$out/shm_inprocess.json" 2>&1 | tail -4 || status=1
bench() {  # bench TRANSPORT LABEL ARGS...
  local transport=$1 label=$2
  shift 2
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net --shared-memory "$transport" "$@" \
    --label "$label" --json "$out/shm_${transport}_${label}.json" | grep -E "^(e2e|call|transport|server_total|admit|input_stage|h2d|compute|d2h|output_stage|outside)" \
    | sed "s/^/  [$transport $label] /" || status=1
}
# The server a client warms itself on before "first_warm_client" (never the measured one).
"$build/bin/chronoserve" --model-repository "$models" --grpc-port $((port + 1)) --metrics-port 0 \
  > "$out/server-shm-warmer.log" 2>&1 &
warmer=$!
trap 'kill "$warmer" 2>/dev/null' EXIT
for _ in $(seq 1 600); do grep -q "server READY" "$out/server-shm-warmer.log" && break; sleep 0.5; done
for transport in $transports; do
  start_server "$build" "$models" "$out/server-shm-$transport-first-nosw.log" "$port" --serving-warmup-requests 0 \
    || { status=1; continue; }
  bench "$transport" first_no_sw -b 128 -n 1 --warmup-requests 0
  stop_server || status=1
  start_server "$build" "$models" "$out/server-shm-$transport-first.log" "$port" || { status=1; continue; }
  bench "$transport" first_warm_client -b 128 -n 1 --warmup-requests 0 --warm-client-requests 50 \
    --warm-client-url "127.0.0.1:$((port + 1))"
  stop_server || status=1
  start_server "$build" "$models" "$out/server-shm-$transport.log" "$port" || { status=1; continue; }
  bench "$transport" first -b 128 -n 1 --warmup-requests 0
  bench "$transport" bs128 -b 128 -n 1000 --warmup-requests 100
  bench "$transport" bs1 -b 1 -n 1000 --warmup-requests 100
  if [ "$transport" != none ]; then  # tensors already in the region: no client copies per request
    bench "$transport" bs128_pre -b 128 -n 1000 --warmup-requests 100 --preload-shared-memory
    bench "$transport" bs1_pre -b 1 -n 1000 --warmup-requests 100 --preload-shared-memory
  fi
  bench "$transport" gap1000 -b 128 -n 20 --warmup-requests 5 --idle-gap-ms 1000
  stop_server || status=1
done
kill -TERM "$warmer"; wait "$warmer"
rm -rf "$models"
python3 - "$out" $transports <<'PY' || status=1
import json, sys
out = sys.argv[1]
transports = sys.argv[2:]
def load(t, label):
    return json.load(open(f"{out}/shm_{t}_{label}.json"))["latency_us"]
ref = {p["batch_size"]: p["compute_p50_us"] for p in json.load(open(f"{out}/shm_inprocess.json"))["points"]}
print(f"\n{'transport':<10}{'run':<18}{'e2e p50':>9}{'transport':>10}{'server':>8}{'admit':>6}{'in_stage':>9}{'h2d':>6}{'compute':>8}{'d2h':>6}{'dev_gap':>8}{'out_stage':>10}{'e2e-GPU':>9}")
rows = {}
for t in transports:
    for label in ("first", "first_warm_client", "first_no_sw", "bs128", "bs1", "gap1000", "bs128_pre", "bs1_pre"):
        if label.endswith("_pre") and t == "none":
            continue
        s = load(t, label)
        p = {k: v["p50"] for k, v in s.items()}
        gpu = p["h2d"] + p["compute"] + p["d2h"]
        rows[(t, label)] = p
        print(f"{t:<10}{label:<18}{p['e2e']:>9.0f}{p['transport']:>10.0f}{p['server_total']:>8.0f}{p.get('admit', 0):>6.0f}"
              f"{p['input_stage']:>9.0f}{p['h2d']:>6.0f}{p['compute']:>8.0f}{p['d2h']:>6.0f}{p.get('device_gap', 0):>8.0f}"
              f"{p['output_stage']:>10.0f}{p['e2e'] - gpu:>9.0f}")
summary = {}
for t in transports:
    b, f, g = rows[(t, "bs128")], rows[(t, "first")], rows[(t, "gap1000")]
    fw = rows[(t, "first_warm_client")]
    fn = rows[(t, "first_no_sw")]
    summary[t] = {
        "e2e_minus_gpu_spans_ms": (b["e2e"] - b["h2d"] - b["compute"] - b["d2h"]) / 1000,
        "first_over_steady": f["e2e"] / b["e2e"],
        "first_warm_client_over_steady": fw["e2e"] / b["e2e"],
        "first_without_serving_warmup_over_steady": fn["e2e"] / b["e2e"],
        "idle_1s_over_back_to_back": g["e2e"] / b["e2e"],
        "server_compute_over_inprocess_graph": b["compute"] / ref[128],
    }
    if "call" in b:
        summary[t]["call_minus_gpu_spans_ms"] = (b["call"] - b["h2d"] - b["compute"] - b["d2h"]) / 1000
    if (t, "bs128_pre") in rows:
        pre = rows[(t, "bs128_pre")]
        summary[t]["preloaded_e2e_minus_gpu_spans_ms"] = (pre["e2e"] - pre["h2d"] - pre["compute"] - pre["d2h"]) / 1000
        summary[t]["preloaded_device_gap_us"] = {"bs128": pre["device_gap"], "bs1": rows[(t, "bs1_pre")]["device_gap"]}
    print(f"{t}: e2e - GPU spans p50 {summary[t]['e2e_minus_gpu_spans_ms']:.3f} ms (goal <= 0.10); "
          f"first/steady {summary[t]['first_over_steady']:.2f}, warm client "
          f"{summary[t]['first_warm_client_over_steady']:.2f}, without serving warm-up "
          f"{summary[t]['first_without_serving_warmup_over_steady']:.2f} (<= 1.5); 1 s idle/back-to-back "
          f"{summary[t]['idle_1s_over_back_to_back']:.2f} (<= 1.10); compute/in-process graph "
          f"{summary[t]['server_compute_over_inprocess_graph']:.2f} (<= 1.15)"
          + (f"; call - GPU spans {summary[t]['call_minus_gpu_spans_ms']:.3f} ms" if "call_minus_gpu_spans_ms" in summary[t] else "")
          + (f"; preloaded e2e - GPU spans {summary[t]['preloaded_e2e_minus_gpu_spans_ms']:.3f} ms"
             if "preloaded_e2e_minus_gpu_spans_ms" in summary[t] else ""))
json.dump(summary, open(f"{out}/shm_summary.json", "w"), indent=2)
PY
exit $status
