# Sourced by the benchmark scripts: start chronoserve, wait (bounded) until it is READY, stop it.
# Sets $server to the server's pid.

# start_server BUILD_DIR REPOSITORY LOG PORT [extra chronoserve flags...]
start_server() {
  local build=$1 repo=$2 log=$3 port=$4
  shift 4
  "$build/bin/chronoserve" --model-repository "$repo" --grpc-port "$port" --metrics-port 0 "$@" > "$log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do  # bounded: 5 minutes
    grep -q "server READY\|server up" "$log" && break
    kill -0 "$server" 2>/dev/null || { echo "server exited:"; cat "$log"; return 1; }
    sleep 0.5
  done
  grep -q "server READY" "$log" || { echo "server not ready:"; tail -20 "$log"; return 1; }
  grep "READY on" "$log" | sed 's/^.*] /  /'
}

# stop_server: SIGTERM, then the server's own exit code must be 0 (graceful shutdown).
stop_server() {
  [ -n "${server:-}" ] || return 0
  kill -TERM "$server"
  wait "$server"
  local rc=$?
  server=""
  [ $rc -eq 0 ] || { echo "server exited with $rc after SIGTERM"; return 1; }
}
