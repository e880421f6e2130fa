#!/bin/bash
# Issue 3's served / in-process at concurrency 256 as the requests grow: run_streaming.sh (policy
# net, dynamic batching with delay 0, concurrency 256, closed loop) once per number of items per
# request in ITEMS_LIST and per forward in FORWARDS, ROUNDS times in turn (the order of the item
# counts reversed every other round), then one table of every point (variant_table): items/s,
# p50, the batch the batcher reached (in items), the server's CPU and served / in-process at that
# batch (goal >= 85 %). With batch-1 requests the served rate is the rate at which gRPC carries
# requests; with more items per request the same request rate carries more items, and the table
# shows from how many items per request on the GPU, not gRPC, sets the served rate.
# Files under OUT/FORWARD/itemsN/roundR.
#
# Usage: benchmarks/run_items_per_request.sh BUILD_DIR OUT_DIR [PORT]
# Environment: ITEMS_LIST="1 4 16 64", FORWARDS="eager graphs", ROUNDS=1, TRANSPORTS="streaming",
#   CONNECTIONS=4 and run_streaming.sh's (CONCURRENCY, THREADS, WINDOW_MS, TRIALS, ...).
# On a CPU-only machine, small counts, e.g.:
#   ITEMS_LIST="1 8" FORWARDS=eager CONCURRENCY=16 THREADS=2 WINDOW_MS=500 ITERATIONS=20 \
#     benchmarks/run_items_per_request.sh build /tmp/items
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8054}
here=$(dirname "$0")
source "$here/server_lib.sh"
status=0
for forward in ${FORWARDS:-eager graphs}; do
  for round in $(seq 1 "${ROUNDS:-1}"); do
    # shellcheck disable=SC2086
    for items in $(round_order "$round" ${ITEMS_LIST:-1 4 16 64}); do
      echo "== forward $forward, round $round, $items item(s) per request"
      EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 PIN=off ITEMS="$items" \
        TRANSPORTS="${TRANSPORTS:-streaming}" CONNECTIONS="${CONNECTIONS:-4}" \
        bash "$here/run_streaming.sh" "$build" "$out/$forward/items$items/round$round" "$port" \
        | sed -n '/^ delay us/,/^goal/p' || status=1
    done
  done
done
variant_table "$out" items_per_request forward items round || status=1
exit $status
