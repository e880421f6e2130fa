#!/bin/bash
# Inference (ModelInfer, ModelStreamInfer) on gRPC's callback API or on threads polling completion
# queues of the asynchronous API (--grpc-infer-threads; issue 3's 85 % at concurrency 256: on the
# callback API every call goes through one completion queue that all of gRPC's callback threads
# poll under one lock, BENCHMARKS §19). run_streaming.sh (policy net, concurrency 256, batch-1 requests, delay 0)
# once per thread count in VARIANTS ("0" = the callback API), ROUNDS times in turn (the order
# reversed every other round), then one table of every point (variant_table). Files under OUT/FORWARD/VALUE/roundN.
# VARIANT_FLAG compares the values of another server flag the same way (e.g. VARIANT_FLAG=--host-keep-warm-ms
# VARIANTS="0 60000"; SERVER_FLAGS adds fixed ones).
#
# Usage: benchmarks/run_infer_threads.sh BUILD_DIR OUT_DIR [PORT]
# Environment: FORWARDS="graphs", VARIANTS="0 1 2 4", VARIANT_FLAG=--grpc-infer-threads, ROUNDS=1,
#   TRANSPORTS="unary" and run_streaming.sh's (CONNECTIONS, THREADS, WORKER_NICE, ...).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8054}
here=$(dirname "$0")
source "$here/server_lib.sh"
variant_flag=${VARIANT_FLAG:---grpc-infer-threads}
status=0
for forward in ${FORWARDS:-graphs}; do
  for round in $(seq 1 "${ROUNDS:-1}"); do
    # shellcheck disable=SC2086
    for value in $(round_order "$round" ${VARIANTS:-0 1 2 4}); do
      echo "== forward $forward, round $round, $variant_flag $value"
      EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 PIN=off TRANSPORTS="${TRANSPORTS:-unary}" \
        SERVER_FLAGS="${SERVER_FLAGS:-} $variant_flag $value" \
        bash "$here/run_streaming.sh" "$build" "$out/$forward/$value/round$round" "$port" \
        | sed -n '/^ delay us/,$p' || status=1
    done
  done
done
variant_table "$out" infer_threads forward "${variant_flag#--}" round || status=1
exit $status
