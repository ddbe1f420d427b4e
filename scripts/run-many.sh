#!/usr/bin/env bash
# The run of many tasks, end to end on the embedded default: the sample run
# (a diamond, independent tasks, one task whose tests always fail and a task
# that depends on it) carried by the run workflow on the simulator, then its
# final status.json. Same stack and KEEP=1 as run-main.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=.run/many
RUNFILE=${RUNFILE:-testdata/runs/sample.json}
. scripts/devstack.sh

start_server
export EDDASIM_SCENARIO=${EDDASIM_SCENARIO:-"checks=pass delay=300ms cost=0.12"}
start_worker

bin/starter run start -address "$ADDR" -follow "$RUNFILE"
SLUG=$(bin/starter run plan "$RUNFILE" | sed -n '1s/^run \([^:]*\):.*/\1/p')
echo
echo "== status.json ($RUN/work/prds/$SLUG/status.json) =="
cat "$RUN/work/prds/$SLUG/status.json"
keep_if_asked
