package intakeflow

import (
	"path/filepath"
	"testing"

	"karvi-edda-temporal/testkit/replaytest"
)

// Recorded histories of the intake workflow replay on the current code: a
// change to its commands must keep them replaying (workflow.GetVersion).
// e2e.TestIntakeBoardSendBackRedispatches records intake-sendback.json (a
// task claimed, ended, sent back, redispatched) and
// e2e.TestIntakeRunTaskCancelledAndLateTaskRefused intake-run-cancel.json
// (a project become a run, a late task refused, one task of the run
// cancelled); INTAKE_WRITE_HISTORY=1 rewrites them.
func TestReplayRecordedIntakeHistories(t *testing.T) {
	replaytest.Histories(t, filepath.Join("testdata", "histories"), Register)
}
