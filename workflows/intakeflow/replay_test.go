package intakeflow

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// Recorded histories of the intake workflow replay on the current code: a
// change to its commands must keep them replaying (workflow.GetVersion).
func TestReplayRecordedIntakeHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep := worker.NewWorkflowReplayer()
			Register(rep)
			require.NoError(t, rep.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
