#!/bin/bash
# What a model reload costs the requests around it: bench_model_reload on the example repository
# (chronoserve-examples), the MLP and the policy net at batch 1 and at 16 items, four clients, 20
# reloads. Prints each run's table; JSON in OUT_DIR. Any failed request fails the script.
#
# Usage: benchmarks/run_model_reload.sh BUILD_DIR OUT_DIR
# Environment: RELOADS (20), BETWEEN (answers between two reloads, 200), CONCURRENCY (4).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
"$build/bin/chronoserve-examples" --out "$repo" > /dev/null || exit 1
status=0
for run in "mlp 1" "policy_net 1" "policy_net 16"; do
  set -- $run
  echo "== $1, batch $2"
  "$build/bin/bench_model_reload" --model-repository "$repo" -m "$1" -b "$2" \
    --concurrency "${CONCURRENCY:-4}" --reloads "${RELOADS:-20}" --requests-between "${BETWEEN:-200}" \
    --json "$out/reload_$1_b$2.json" 2> "$out/reload_$1_b$2.log" || status=1
done
exit $status
