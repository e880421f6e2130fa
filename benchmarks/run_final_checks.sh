#!/bin/bash
# Cross-checks on the GPU machine: (1) an independent client (Python grpcio, run-time message
# classes) against the same server, to see how much of `transport` is our gRPC 1.51 client;
# (2) the in-process CUDA-graph reference (bench_inprocess_throughput on a graphs config);
# (3) the first request after READY vs steady state.
# Usage: benchmarks/run_final_checks.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8031}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
status=0
models=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$models/policy_net/config.pbtxt"
# (2) in-process graph replay reference, same device, same run.
"$build/bin/bench_inprocess_throughput" --model-repository "$models" -m policy_net --batch-sizes 1,128 --one-request \
  --json "$out/inprocess_graph.json" 2>&1 | tail -6 || status=1
source "$src/benchmarks/server_lib.sh"
start_server "$build" "$models" "$out/final_server.log" "$port" || exit 1
# (3) the very first request after READY, then steady state.
"$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 1 --warmup-requests 0 \
  --label "first request after READY (graphs)" --json "$out/first_request.json" | tail -12 || status=1
"$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 128 -n 1000 --warmup-requests 100 \
  --label "steady (graphs)" --json "$out/steady_graphs.json" | grep -E "e2e|transport|server_total|compute" || status=1
# (1) the independent Python client against the same server.
protoc --include_imports --descriptor_set_out="$out/inference.desc" -I "$src/proto" "$src/proto/inference.proto" || status=1
for b in 128 1; do
  python3 "$src/benchmarks/python_client_probe.py" "$out/inference.desc" "127.0.0.1:$port" policy_net $b 1000 \
    "$out/python_client_bs$b.json" || status=1
done
stop_server || status=1
rm -rf "$models"
exit $status
