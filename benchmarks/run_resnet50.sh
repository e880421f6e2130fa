#!/bin/bash
# ResNet-50 (torchvision architecture, random weights) on the GPU machine (issue 6): exported with
# the machine's PyTorch (benchmarks/resnet50/export_resnet50.py), then
#  - served eager and with CUDA graphs: bench_serve_latency, batch 1, closed loop, concurrency 1;
#  - the in-process reference on the graphs config: bench_inprocess_throughput --one-request
#    (the backend's Execute() with no gRPC or queue), in the same run;
#  - the offline profile (chronoserve profile) of the graphs config at batch 1 and 8.
# Prints server compute p50 / in-process graph replay p50. Skips (exit 0) without torchvision.
# Usage: benchmarks/run_resnet50.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8031}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "$here/server_lib.sh"
python3 -c "import torch, torchvision" 2>/dev/null || { echo "run_resnet50: no torchvision here; skipped"; exit 0; }
status=0
for mode in eager graphs; do
  repo=$(mktemp -d)
  graphs=""
  [ $mode = graphs ] && graphs="1,8"
  python3 "$here/resnet50/export_resnet50.py" "$repo" --graphs "$graphs" || exit 1
  if start_server "$build" "$repo" "$out/server-resnet50-$mode.log" "$port"; then
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m resnet50 -b 1 -n 300 --warmup-requests 50 \
      --label "resnet50-$mode-bs1" --json "$out/resnet50-$mode-bs1.json" || status=1
    stop_server || status=1
  else
    status=1
  fi
  if [ $mode = graphs ]; then
    "$build/bin/bench_inprocess_throughput" --model-repository "$repo" -m resnet50 --one-request \
      --batch-sizes 1,8 -n 300 --json "$out/resnet50-inprocess.json" || status=1
    "$build/bin/chronoserve" profile "$repo/resnet50" --batch-sizes 1,8 --repetitions 200 \
      --no-throughput-search --json "$out/resnet50-profile.json" > "$out/resnet50-profile.txt" 2>&1 || status=1
    cat "$out/resnet50-profile.txt"
  fi
  rm -rf "$repo"
done
python3 - "$out" <<'PY' || status=1
import json, sys
out = sys.argv[1]
def serve(mode):
    return json.load(open(f"{out}/resnet50-{mode}-bs1.json"))["latency_us"]
inproc = {p["batch_size"]: p for p in json.load(open(f"{out}/resnet50-inprocess.json"))["points"]}
eager, graphs = serve("eager"), serve("graphs")
print("\nResNet-50 bs1, p50 us      e2e   server_total  compute  launch  outside GPU spans")
for name, s in (("served eager", eager), ("served graphs", graphs)):
    print(f"{name:<22} {s['e2e']['p50']:8.0f} {s['server_total']['p50']:12.0f} {s['compute']['p50']:8.0f}"
          f" {s['launch']['p50']:7.0f} {s['outside_gpu_spans']['p50']:10.0f}")
ref = inproc[1]["compute_p50_us"]
print(f"in-process graph replay compute p50 (bs1): {ref:.0f} us")
print(f"server compute p50 / in-process graph replay p50 = {graphs['compute']['p50']:.0f} / {ref:.0f}"
      f" = {graphs['compute']['p50'] / ref:.3f}  (issue 6 goal <= 1.15)")
PY
exit $status
