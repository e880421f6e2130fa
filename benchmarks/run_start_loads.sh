#!/bin/bash
# How long the server's start takes to load a repository of several models, one at a time against
# several at once (--model-load-thread-count). The repository: MODELS copies of one model, each its
# own model with its own file: the example policy net (max_batch_size 128; on a GPU with CUDA graphs,
# each worker capturing its buckets after its warm-up; on the CPU eager), or with MODEL=resnet50
# ResNet-50 (benchmarks/resnet50/export_resnet50.py: needs PyTorch and torchvision; max_batch_size
# 8, CUDA graphs at batch 1 and 8 on a GPU). For each thread count, ROUNDS
# fresh servers (the counts alternate their order round by round); each server's own log line
# "start's loads done in N ms" is the figure, beside the sum of its models' load + warm-up times.
# Prints a table; JSON in OUT_DIR/start_loads_MODEL.json. Any server that fails to start fails the script.
#
# Usage: benchmarks/run_start_loads.sh BUILD_DIR OUT_DIR [PORT]
# Environment: MODEL (policy_net, or resnet50), MODELS (4), THREADS ("1 4"), ROUNDS (2), GRAPHS (1:
#              on a GPU; 0 eager), WARMUP_SIZES (the models' warmup_batch_sizes; unset: the default).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8043}
src=$(cd "$(dirname "$0")/.." && pwd)
source "$src/benchmarks/server_lib.sh"
mkdir -p "$out"
models=${MODELS:-4}
rounds=${ROUNDS:-2}
read -r -a counts <<< "${THREADS:-1 4}"
mode=eager
[ "${GRAPHS:-1}" = 0 ] || ! nvidia-smi -L > /dev/null 2>&1 || mode=graphs
examples=$(mktemp -d)
repo=$(mktemp -d)
trap 'stop_server; rm -rf "$examples" "$repo"' EXIT
model=${MODEL:-policy_net}
case $model in
  policy_net) "$build/bin/chronoserve-examples" --out "$examples" > /dev/null || exit 1 ;;
  resnet50)
    graphs=""
    [ "$mode" = eager ] || graphs="1,8"
    python3 "$src/benchmarks/resnet50/export_resnet50.py" "$examples" --graphs "$graphs" > /dev/null || exit 1 ;;
  *) echo "MODEL must be policy_net or resnet50"; exit 2 ;;
esac
for i in $(seq 1 "$models"); do
  name=${model}_$i
  mkdir -p "$repo/$name/1"
  cp "$examples/$model/1/model.pt" "$repo/$name/1/"
  sed "s/^name: \"$model\"/name: \"$name\"/" "$examples/$model/config.pbtxt" > "$repo/$name/config.pbtxt"
  [ "$mode" = eager ] || [ "$model" = resnet50 ] || echo 'optimization { cuda { graphs: true } }' >> "$repo/$name/config.pbtxt"
  [ -z "${WARMUP_SIZES:-}" ] ||
    printf 'parameters { key: "warmup_batch_sizes" value { string_value: "%s" } }\n' "$WARMUP_SIZES" >> "$repo/$name/config.pbtxt"
done

status=0
results=()  # "threads round loads_ms sum_ms"
for round in $(seq 1 "$rounds"); do
  order=("${counts[@]}")
  if [ $((round % 2)) -eq 0 ]; then  # every other round the other way round
    order=()
    for ((k = ${#counts[@]} - 1; k >= 0; k--)); do order+=("${counts[k]}"); done
  fi
  for threads in "${order[@]}"; do
    log="$out/start_loads_${model}_t${threads}_r${round}.log"
    if ! start_server "$build" "$repo" "$log" "$port" --model-load-thread-count "$threads" > /dev/null; then
      status=1
      continue
    fi
    loads_ms=$(grep -o "start's loads done in [0-9]* ms" "$log" | grep -o "[0-9]*")
    ready=$(grep -c "version 1 READY on" "$log")
    # Each model's own time: "load N ms, warm-up M ms" of its READY line.
    sum_ms=$(grep -o "READY on .*: load [0-9]* ms, warm-up [0-9]* ms" "$log" |
             awk '{ for (i = 1; i <= NF; i++) if ($i == "load" || $i == "warm-up") s += $(i + 1) } END { print s + 0 }')
    stop_server || status=1
    [ "$ready" = "$models" ] || { echo "threads $threads round $round: $ready of $models models READY"; status=1; }
    results+=("$threads $round ${loads_ms:-0} $sum_ms")
  done
done

printf '%s\n' "${results[@]}" | python3 -c '
import json, statistics, sys
mode, models, out, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [line.split() for line in sys.stdin if line.strip()]
runs = [{"threads": int(t), "round": int(r), "loads_ms": int(l), "models_sum_ms": int(s)} for t, r, l, s in rows]
print(f"{models} copies of {model} ({mode}), the start'"'"'s loads, ms:")
print("| --model-load-thread-count | rounds | loads done in (each round) | median | sum of the models'"'"' load + warm-up (median) |")
print("|---|---|---|---|---|")
medians = {}
for threads in sorted({r["threads"] for r in runs}):
    mine = [r for r in runs if r["threads"] == threads]
    medians[threads] = statistics.median(r["loads_ms"] for r in mine)
    each = ", ".join(str(r["loads_ms"]) for r in mine)
    own = statistics.median(r["models_sum_ms"] for r in mine)
    print(f"| {threads} | {len(mine)} | {each} | {medians[threads]:.0f} | {own:.0f} |")
if len(medians) > 1:
    low, high = min(medians), max(medians)
    if medians[high] > 0:
        print(f"one at a time / {high} at once: {medians[low] / medians[high]:.2f}x")
json.dump({"model": model, "models": models, "mode": mode, "runs": runs,
           "median_loads_ms": {str(k): v for k, v in medians.items()}}, open(out, "w"), indent=1)
' "$mode" "$models" "$out/start_loads_$model.json" "$model" || status=1
exit $status
