#!/bin/bash
# chronobench through the three transports on the GPU machine: the tensors in the message, in system
# shared memory, and in CUDA shared memory (the client's GPU memory, by CUDA IPC handle; chronobench
# built with CUDA). The policy net with CUDA graphs and keep-warm on one server; per round and
# transport two closed-loop points: batch-1 requests at concurrency 64 (requests batch on the server:
# with CUDA regions they are gathered on the device) and batch-128 requests at concurrency 2. Rounds
# (ROUNDS, default 2) alternate the transports' order. Prints throughput, e2e and the server's spans
# (p50) and the items per executed batch; JSON per point. Transports ending in "_pre" run with
# --shared-memory-preload (inputs written once, outputs left in the regions: no client copies).
# Usage: [ROUNDS=2] [TRANSPORTS="none system cuda system_pre cuda_pre"] benchmarks/run_chronobench_shm.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
rounds=${ROUNDS:-2}
transports=${TRANSPORTS:-none system cuda system_pre cuda_pre}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
scratch_dir work || exit 1
models=$work/models
write_warm_graph_repo "$build" "$models" || exit 1
start_server "$build" "$models" "$out/server-cb-shm.log" "$port" || exit 1
status=0
point() {  # point TRANSPORT ROUND LABEL ARGS...
  local transport=$1 round=$2 label=$3
  shift 3
  local preload=()
  [ "${transport%_pre}" = "$transport" ] || preload=(--shared-memory-preload)
  "$build/bin/chronobench" -m policy_net -u "127.0.0.1:$port" --shared-memory "${transport%_pre}" "${preload[@]}" -p 2000 -r 4 -s 15 \
    --warmup-requests 200 "$@" --json "$out/cb_shm_${transport}_${label}_r${round}.json" > "$out/cb_shm_${transport}_${label}_r${round}.log" 2>&1 \
    || { echo "chronobench $transport $label round $round failed:"; tail -5 "$out/cb_shm_${transport}_${label}_r${round}.log"; status=1; }
}
for round in $(seq 1 "$rounds"); do
  for transport in $(round_order "$round" $transports); do
    point "$transport" "$round" bs1_c64 -b 1 --concurrency-range 64
    point "$transport" "$round" bs128_c2 -b 128 --concurrency-range 2
  done
done
stop_server || status=1
python3 - "$out" "$rounds" $transports <<'PY' || status=1
import json, os, sys
out, rounds, transports = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"\n{'point':<10}{'transport':<10}{'round':>6}{'req/s':>10}{'items/s':>11}{'e2e':>8}{'transport':>10}{'server':>8}"
      f"{'h2d':>6}{'compute':>8}{'d2h':>6}{'items/batch':>12}{'errors':>7}")
summary = {}
for label in ("bs1_c64", "bs128_c2"):
    for t in transports:
        for r in range(1, rounds + 1):
            path = f"{out}/cb_shm_{t}_{label}_r{r}.json"
            if not os.path.exists(path):
                continue
            run = json.load(open(path))["runs"][0]
            lat = {k: v.get("p50", 0) for k, v in run["latency_us"].items() if isinstance(v, dict)}
            per_batch = run.get("batch_size_executed", {}).get("per_batch_mean") or 0
            print(f"{label:<10}{t:<10}{r:>6}{run['throughput_rps']:>10.0f}{run['throughput_items_per_s']:>11.0f}"
                  f"{lat.get('e2e', 0):>8.0f}{lat.get('transport', 0):>10.0f}{lat.get('server_total', 0):>8.0f}"
                  f"{lat.get('h2d', 0):>6.0f}{lat.get('compute', 0):>8.0f}{lat.get('d2h', 0):>6.0f}{per_batch:>12.1f}"
                  f"{run['errors']:>7}")
            summary.setdefault(label, {}).setdefault(t, []).append(
                {"round": r, "throughput_rps": run["throughput_rps"], "e2e_p50_us": lat.get("e2e"),
                 "h2d_p50_us": lat.get("h2d"), "items_per_batch": per_batch, "errors": run["errors"]})
json.dump(summary, open(f"{out}/cb_shm_summary.json", "w"), indent=2)
PY
exit $status
