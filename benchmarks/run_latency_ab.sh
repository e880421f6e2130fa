#!/bin/bash
# Two builds of chronoserve against each other at concurrency 1 (issue 6's e2e - GPU spans): the
# policy net with CUDA graphs (on a CPU-only build: eager) on a fresh server per variant and round,
# batch 128 and batch 1, measured by that build's bench_serve_latency (its own client library) and
# by the independent Python grpcio client (the same for both variants: its difference is the
# server's alone). Rounds alternate the order (base, new; new, base; ...) so that drift in the
# machine falls on both alike. Prints every run and the median per variant, and writes
# OUT_DIR/latency_ab.json.
#
# Usage: BASE_BUILD=DIR benchmarks/run_latency_ab.sh BUILD_DIR OUT_DIR [PORT]
# Environment: BASE_BUILD (required), ROUNDS=3, REQUESTS=1000, GRAPHS=1 (0: eager), PYTHON=1 (0:
#   no Python client).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8061}
base=${BASE_BUILD:?BASE_BUILD: the build to compare with}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
source "$here/server_lib.sh"
mkdir -p "$out"
requests=${REQUESTS:-1000}
models=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$models"' EXIT
"$build/bin/chronoserve-examples" --out "$models" >/dev/null || exit 1
rm -rf "$models/mlp"
[ "${GRAPHS:-1}" = 1 ] && printf '%s\n' 'optimization { cuda { graphs: true } }' >> "$models/policy_net/config.pbtxt"
python=${PYTHON:-1}
if [ "$python" = 1 ]; then
  protoc --include_imports --descriptor_set_out="$out/inference.desc" -I "$src/proto" "$src/proto/inference.proto" ||
    python=0
fi
status=0
for round in $(seq 1 "${ROUNDS:-3}"); do
  for variant in $(round_order "$round" base new); do
    ab_start "$round" "$variant" "$build" "$base" "$out" "$models" "$port" || { status=1; continue; }
    for batch in 128 1; do
      faults_before=$(minor_faults "$server")
      "$dir/bin/bench_serve_latency" -u "127.0.0.1:$port" -m policy_net -b $batch -n "$requests" \
        --warmup-requests 100 --label "$variant round $round bs$batch" --json "$run/serve_bs$batch.json" |
        grep -E "^(e2e|transport|server_total|outside_gpu_spans) |page faults" || status=1
      awk -v a="$faults_before" -v b="$(minor_faults "$server")" -v n=$((requests + 100)) \
        'BEGIN { printf "server page faults per request: %.2f (warm-up included)\n", (b - a) / n }'
      if [ "$python" = 1 ]; then
        python3 "$here/python_client_probe.py" "$out/inference.desc" "127.0.0.1:$port" policy_net $batch \
          "$requests" "$run/python_bs$batch.json" | tail -2 || status=1
      fi
    done
    stop_server || status=1
  done
done
# Medians over the rounds of each p50, per variant.
python3 - "$out" <<'EOF' || status=1
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for variant in ("base", "new"):
    for path in sorted(glob.glob(os.path.join(out, variant, "round*", "*.json"))):
        name = os.path.basename(path)[:-5]
        with open(path) as f:
            record = json.load(f)
        if name.startswith("serve_"):
            figures = {k: v["p50"] for k, v in record["latency_us"].items()}
        else:
            figures = {k[:-3]: v["p50"] for k, v in record.items() if k.endswith("_us")}
        for key, value in figures.items():
            rows.setdefault((name, key), {}).setdefault(variant, []).append(value)
result = []
print("\nmedians of the rounds' p50, us        base        new   new/base")
for (name, key), by in sorted(rows.items()):
    if "base" not in by or "new" not in by:
        continue
    b, n = statistics.median(by["base"]), statistics.median(by["new"])
    result.append({"run": name, "figure": key, "base": by["base"], "new": by["new"], "base_median": b, "new_median": n})
    print(f"{name + ' ' + key:38s} {b:10.1f} {n:10.1f} {n / b if b else 0:10.3f}")
with open(os.path.join(out, "latency_ab.json"), "w") as f:
    json.dump(result, f, indent=2)
EOF
exit $status
