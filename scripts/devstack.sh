# Sourced by the run scripts: a Temporal dev server on 127.0.0.1 (Web UI on
# :8233) and the worker with the conductor simulator and the file brief sink,
# in the directory $RUN. Everything started here is stopped by pid on exit.
# Set EDDASIM_SCENARIO before calling start_worker to choose the simulator's
# behaviour.

PORT=${TEMPORAL_PORT:-7233}
UI_PORT=${TEMPORAL_UI_PORT:-8233}
ADDR=127.0.0.1:$PORT

port_busy() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

pids=()
cleanup() {
  local status=$?
  for ((i=${#pids[@]}-1; i>=0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  exit $status
}

start_server() {
  for p in "$PORT" "$UI_PORT"; do
    if port_busy "$p"; then
      echo "run: 127.0.0.1:$p is already in use; stop what listens there or set TEMPORAL_PORT / TEMPORAL_UI_PORT" >&2
      exit 1
    fi
  done
  rm -rf "$RUN"
  mkdir -p "$RUN"
  trap cleanup EXIT INT TERM
  # Eager activities and a faster transfer queue: the dev server's defaults
  # add ~80 ms to every event's way to the brief (BENCHMARKS.md).
  echo "run: starting Temporal dev server on $ADDR (Web UI http://127.0.0.1:$UI_PORT)"
  bin/temporal server start-dev --ip 127.0.0.1 --ui-ip 127.0.0.1 --port "$PORT" --ui-port "$UI_PORT" \
    --db-filename "$RUN/temporal.db" --log-level warn \
    --dynamic-config-value system.enableActivityEagerExecution=true \
    --dynamic-config-value history.transferProcessorMaxPollRPS=1000 \
    --search-attribute KarviTaskId=Keyword --search-attribute EddaPlanName=Keyword \
    --search-attribute EddaCurrentPhase=Keyword --search-attribute KarviTaskStatus=Keyword \
    >"$RUN/temporal.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    if bin/temporal operator cluster health --address "$ADDR" >/dev/null 2>&1; then break; fi
    if ! kill -0 "${pids[0]}" 2>/dev/null; then echo "run: dev server died; see $RUN/temporal.log" >&2; exit 1; fi
    sleep 0.2
  done
  bin/temporal operator cluster health --address "$ADDR" >/dev/null
}

start_worker() {
  echo "run: starting worker (conductor: simulator, sink: files in $RUN/briefs)"
  bin/worker -address "$ADDR" -work-root "$RUN/work" -conductor "$PWD/bin/eddasim" \
    -sink file -sink-dir "$RUN/briefs" >"$RUN/worker.log" 2>&1 &
  pids+=($!)
}

keep_if_asked() {
  if [ "${KEEP:-0}" = 1 ]; then
    echo "run: KEEP=1: dev server and worker stay up; Web UI http://127.0.0.1:$UI_PORT ; Ctrl-C to stop"
    wait "${pids[0]}"
  fi
}

# start_jaeger starts bin/jaeger (in-memory store) on 127.0.0.1 and points
# every process started after it at it, by the OpenTelemetry environment.
JAEGER_UI_PORT=${JAEGER_UI_PORT:-16686}
start_jaeger() {
  for p in "$JAEGER_UI_PORT" 4317 4318 16685; do
    if port_busy "$p"; then
      echo "run: 127.0.0.1:$p is already in use (Jaeger needs it); stop what listens there" >&2
      exit 1
    fi
  done
  echo "run: starting Jaeger (UI http://127.0.0.1:$JAEGER_UI_PORT)"
  JAEGER_QUERY_HTTP=127.0.0.1:$JAEGER_UI_PORT JAEGER_QUERY_GRPC=127.0.0.1:16685 \
    JAEGER_OTLP_GRPC=127.0.0.1:4317 JAEGER_OTLP_HTTP=127.0.0.1:4318 \
    bin/jaeger --config tools/jaeger/config.yaml >"$RUN/jaeger.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    if (exec 3<>/dev/tcp/127.0.0.1/"$JAEGER_UI_PORT") 2>/dev/null; then break; fi
    sleep 0.2
  done
  export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=${OTEL_SERVICE_NAME:-karvi-edda-temporal}
}

# trace_id is the trace of a task started on its own: the first 16 bytes of
# sha256 over the parts package traces hashes (traces/ids.go).
trace_id() {
  printf 'karvi-edda-temporal/traces/v1\0task\0%s\0' "$1" | sha256sum | cut -c1-32
}
