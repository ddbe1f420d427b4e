#!/usr/bin/env bash
# `make cluster-test`: the fleet suite, the chaos suite, the run suite and
# the server-restart test, against the PostgreSQL-backed Temporal server of
# scripts/cluster.sh instead of the suites' own dev server. A cluster that
# was not running is started, and stopped again at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${KARVI_EDDA_BIN:-$PWD/bin}
export TEMPORAL_CLI=${TEMPORAL_CLI:-$BIN/temporal} KARVI_EDDA_BIN=$BIN
eval "$(./scripts/cluster.sh env)"

if [[ $(./scripts/cluster.sh status) == *"temporal server: pid"* ]]; then
  echo "cluster-test: using the running cluster"
else
  ./scripts/cluster.sh start
  trap './scripts/cluster.sh stop' EXIT
fi

export KARVI_TEST_TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS
export KARVI_TEST_TEMPORAL_RESTART="$PWD/scripts/cluster.sh restart-server"
# Each suite makes a namespace of its own there; none of these tests reads
# the worker's or the CLI's namespace from anywhere else.
unset TEMPORAL_NAMESPACE

# fleet: fleet_test.go; chaos: the worker SIGKILL chaos; run: the
# run-of-many-tasks tests of both suites; and the server killed under load.
FAULTS=${CLUSTER_FAULTS:-'^(TestFleetRunsEachTaskOnItsHost|TestRollingRestartLosesNothing|TestHostLossMovesItsTasksElsewhere|TestReturningHostStopsTheConductorsItLost|TestWorkerSIGKILLChaos|TestRunSurvivesRepeatedWorkerKills|TestServerRestartUnderLoadLosesNothing)$'}
E2E=${CLUSTER_E2E:-'^TestRun'}
start=$(date +%s)
rc=0
"$GO" test -race -count=1 -tags realserver -timeout 30m -run "$E2E" ./e2e/ || rc=1
"$GO" test -race -count=1 -tags realserver -timeout 30m -run "$FAULTS" ./faults/ || rc=1
if ((rc)); then
  echo "cluster-test: FAILED after $(($(date +%s) - start)) s" >&2
  exit 1
fi
echo "cluster-test: passed in $(($(date +%s) - start)) s"
