package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// Every history recorded from a real run (testdata/histories, in the SDK's
// JSON history format) must replay on the current workflow code: a change
// that would break workflows already running in production fails here with
// a non-determinism error. faults.TestReplayRecordedHappyPath records
// happy.json from a live dev server (FAULTS_WRITE_HISTORY=1 rewrites it);
// refresh it only together with a versioned (workflow.GetVersion) change.
func TestReplayRecordedHistories(t *testing.T) {
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
