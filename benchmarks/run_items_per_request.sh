#!/bin/bash
# Issue 3's served / in-process at concurrency 256 as the requests grow: run_streaming.sh (policy
# net, dynamic batching with delay 0, concurrency 256, closed loop) once per number of items per
# request in ITEMS_LIST and per forward in FORWARDS, ROUNDS times in turn (the order of the item
# counts and variants reversed every other round), then one table of every point (variant_table): items/s,
# p50, the batch the batcher reached (in items), the server's CPU and served / in-process at that
# batch (goal >= 85 %). With batch-1 requests the served rate is the rate at which gRPC carries
# requests; with more items per request the same request rate carries more items, and the table
# shows from how many items per request on the GPU, not gRPC, sets the served rate.
# VARIANT_FLAG with VARIANTS compares the values of a server flag at every point (e.g.
# VARIANT_FLAG=--input-arena-mib VARIANTS="auto 128"). Files under OUT/FORWARD/VALUE/itemsN/roundR
# (VALUE "as_is" without VARIANT_FLAG).
#
# Usage: benchmarks/run_items_per_request.sh BUILD_DIR OUT_DIR [PORT]
# Environment: ITEMS_LIST="1 4 16 64", FORWARDS="eager graphs", ROUNDS=1, TRANSPORTS="streaming",
#   CONNECTIONS=4, VARIANT_FLAG="", VARIANTS="" and run_streaming.sh's (CONCURRENCY, THREADS, WINDOW_MS, TRIALS, ...).
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
variant_flag=${VARIANT_FLAG:-}
values=${VARIANTS:-as_is}
[ -n "$variant_flag" ] || values=as_is
for forward in ${FORWARDS:-eager graphs}; do
  for round in $(seq 1 "${ROUNDS:-1}"); do
    # shellcheck disable=SC2086
    for items in $(round_order "$round" ${ITEMS_LIST:-1 4 16 64}); do
      # shellcheck disable=SC2086
      for value in $(round_order "$round" $values); do
        flags="${SERVER_FLAGS:-}"
        [ -z "$variant_flag" ] || flags="$flags $variant_flag $value"
        echo "== forward $forward, round $round, $items item(s) per request${variant_flag:+, $variant_flag $value}"
        EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 PIN=off ITEMS="$items" SERVER_FLAGS="$flags" \
          TRANSPORTS="${TRANSPORTS:-streaming}" CONNECTIONS="${CONNECTIONS:-4}" \
          bash "$here/run_streaming.sh" "$build" "$out/$forward/$value/items$items/round$round" "$port" \
          | sed -n '/^ delay us/,/^goal/p' || status=1
      done
    done
  done
done
label=variant
[ -z "$variant_flag" ] || label=${variant_flag#--}
variant_table "$out" items_per_request forward "$label" items round || status=1
exit $status
