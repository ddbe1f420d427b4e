#!/usr/bin/env bash
# The main job, end to end on the embedded default: a Temporal dev server on
# 127.0.0.1 (Web UI on :8233), the worker with the conductor simulator and the
# file brief sink, and the sample dispatch followed to its end. Everything it
# starts it stops, by pid. KEEP=1 leaves the server and worker up until Ctrl-C,
# to look around in the Web UI. TRACE=1 starts Jaeger too (bin/jaeger), sends
# the traces there and prints the task's.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=.run/main
DISPATCH=${DISPATCH:-testdata/sample/dispatch.json}
. scripts/devstack.sh

start_server
if [ "${TRACE:-0}" = 1 ]; then start_jaeger; fi
# The simulator runs each phase's checks for real by default; the sample has
# no Rust project or git repo, so its checks are simulated as passing.
export EDDASIM_SCENARIO=${EDDASIM_SCENARIO:-"checks=pass delay=1500ms; phase=implement cost=0.85; phase=test cost=0.42; phase=docs cost=0.18"}
start_worker

TASK=$(sed -n 's/.*"taskId"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$DISPATCH" | head -1)
bin/starter start -address "$ADDR" -follow "$DISPATCH"

echo
echo "== final brief (query 'brief' of karvi-task-$TASK) =="
bin/starter brief -address "$ADDR" "$TASK"
echo "== task status (file sink: $RUN/briefs/$TASK/status.json) =="
cat "$RUN/briefs/$TASK/status.json"
echo
if [ "${TRACE:-0}" = 1 ]; then
  echo "== trace (Jaeger; the task's span arrives with its last status) =="
  echo "http://127.0.0.1:$JAEGER_UI_PORT/api/traces/$(trace_id "$TASK")  (bin/jaeger has no UI assets: this is its JSON)"
fi
keep_if_asked
