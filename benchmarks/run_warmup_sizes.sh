#!/bin/bash
# What `warmup_batch_sizes` trades: the warm-up before READY against the first requests at a batch
# size the warm-up left out. For each setting, a fresh server with the example policy net
# (max_batch_size 128; eager, and on a GPU also with CUDA graphs, whose default warm-up is the
# buckets): its warm-up time (the READY line), then three single requests at batch 64, one after
# another, and 200 more (20 warm-up) for the steady figure. GRAPHS=0 skips the graphs rows.
# Usage: benchmarks/run_warmup_sizes.sh BUILD_DIR OUT_DIR [PORT]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8041}
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/benchmarks/server_lib.sh"
mkdir -p "$out"
examples=$(mktemp -d)
"$build/bin/chronoserve-examples" --out "$examples" >/dev/null || exit 1
status=0
rows=()
runs=(eager:all eager:1,128 eager:none)
[ "${GRAPHS:-1}" = 0 ] || ! nvidia-smi -L > /dev/null 2>&1 || runs+=(graphs:default graphs:all)
for run in "${runs[@]}"; do
  mode=${run%%:*}
  setting=${run#*:}
  repo=$(mktemp -d)
  mkdir -p "$repo/policy_net/1"
  cp "$examples/policy_net/1/model.pt" "$repo/policy_net/1/"
  cp "$examples/policy_net/config.pbtxt" "$repo/policy_net/"
  [ "$mode" = eager ] || echo 'optimization { cuda { graphs: true } }' >> "$repo/policy_net/config.pbtxt"
  [ "$setting" = default ] ||
    printf 'parameters { key: "warmup_batch_sizes" value { string_value: "%s" } }\n' "$setting" >> "$repo/policy_net/config.pbtxt"
  tag=${mode}_${setting//,/_}
  log="$out/warmup_sizes_server_$tag.log"
  start_server "$build" "$repo" "$log" "$port" || { status=1; rm -rf "$repo"; continue; }
  warmup_ms=$(grep -o "model 'policy_net' version 1 READY.*warm-up [0-9]* ms" "$log" | grep -o "warm-up [0-9]*" | grep -o "[0-9]*")
  row="$mode $setting $warmup_ms"
  for i in 1 2 3; do
    json="$out/warmup_sizes_${tag}_request$i.json"
    "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 64 -n 1 --warmup-requests 0 \
      --label "$mode, warmup_batch_sizes $setting, request $i at batch 64" --json "$json" > /dev/null || status=1
    row+=" $(python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['latency_us']; print('%.0f/%.0f' % (d['e2e']['p50'], d['compute']['p50']))" "$json")"
  done
  json="$out/warmup_sizes_${tag}_steady.json"
  "$build/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b 64 -n 200 --warmup-requests 20 \
    --label "$mode, warmup_batch_sizes $setting, steady at batch 64" --json "$json" > /dev/null || status=1
  row+=" $(python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['latency_us']; print('%.0f/%.0f' % (d['e2e']['p50'], d['compute']['p50']))" "$json")"
  stop_server || status=1
  rm -rf "$repo"
  rows+=("$row")
done
rm -rf "$examples"
echo "policy net, max_batch_size 128; e2e/compute us at batch 64"
printf '%-7s %-12s %12s %14s %14s %14s %16s\n' forward warmup_sizes warm-up_ms 1st_request 2nd_request 3rd_request steady_p50
for row in "${rows[@]}"; do printf '%-7s %-12s %12s %14s %14s %14s %16s\n' $row; done | tee "$out/warmup_sizes.txt"
exit $status
