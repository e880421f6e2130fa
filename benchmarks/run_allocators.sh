#!/bin/bash
# Does the memory allocator set the served worker's cost per batch? (issue 3's 85 % at concurrency
# 256.) A served batch's requests, payloads and responses are allocated on gRPC's threads and freed
# on the worker's and the completion pool's (and the reverse), which glibc's per-thread arenas
# handle worst; the in-process reference allocates and frees on one thread. run_streaming.sh
# (policy net, concurrency 256, batch-1 requests, delay 0, unary and streaming) per forward (CUDA
# graphs, eager) and per allocator in ALLOCATORS, preloaded (LD_PRELOAD) into the server and the
# in-process reference alike; chronobench keeps glibc's. Prints one table of every run.
#
# Usage: benchmarks/run_allocators.sh BUILD_DIR OUT_DIR [PORT]
# Environment: ALLOCATORS="glibc jemalloc tcmalloc" (an allocator not found is skipped, said so; also
#   glibc-notrim: glibc's malloc tuned never to return memory to the kernel),
#   LIB_DIRS (where to look for libjemalloc.so.2 / libtcmalloc_minimal.so.4; default the system's
#   library directories and /opt/tools/usr/lib/x86_64-linux-gnu), FORWARDS="graphs eager",
#   CONNECTIONS="4", and run_streaming.sh's (CONCURRENCY, THREADS, PERF_WORKER, ...).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
port=${3:-8053}
here=$(dirname "$0")
source "$here/server_lib.sh"
lib_dirs=${LIB_DIRS:-/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib /opt/tools/usr/lib/x86_64-linux-gnu}
find_lib() {
  local d
  for d in $lib_dirs; do [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }; done
  return 1
}
# glibc-notrim: glibc's malloc that never gives memory back to the kernel while serving (no heap
# trimming, no mmap'd chunks up to 32 MB): no munmap / madvise, so no TLB shootdowns from free().
notrim=glibc.malloc.trim_threshold=17179869184:glibc.malloc.mmap_threshold=33554432
status=0
for alloc in ${ALLOCATORS:-glibc jemalloc tcmalloc}; do
  case $alloc in
    glibc) lib="" ;;
    glibc-notrim) lib="" ;;
    jemalloc) lib=$(find_lib libjemalloc.so.2) || { echo "== $alloc: libjemalloc.so.2 not found, skipped"; continue; } ;;
    tcmalloc) lib=$(find_lib libtcmalloc_minimal.so.4) || { echo "== $alloc: libtcmalloc_minimal.so.4 not found, skipped"; continue; } ;;
    *) echo "unknown allocator '$alloc' (glibc, glibc-notrim, jemalloc, tcmalloc)"; exit 2 ;;
  esac
  for forward in ${FORWARDS:-graphs eager}; do
    env_words=""
    [ "$alloc" = glibc-notrim ] && env_words="GLIBC_TUNABLES=$notrim"
    echo "== allocator: $alloc${lib:+ ($lib)}${env_words:+ ($env_words)}, forward: $forward"
    SERVER_ENV="$env_words" PRELOAD="$lib" EXTRA_CONFIG="$(forward_config "$forward")" DELAYS=0 CONNECTIONS="${CONNECTIONS:-4}" \
      bash "$here/run_streaming.sh" "$build" "$out/$alloc/$forward" "$port" || status=1
  done
done

variant_table "$out" allocators allocator forward || status=1
exit $status
