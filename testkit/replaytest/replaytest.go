// Package replaytest replays recorded workflow histories on the current
// workflow code, for the tests of each package that keeps histories.
package replaytest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// Histories replays every history in dir (*.json, in the SDK's JSON
// history format), each as a subtest named after its file, on the
// workflows register adds. A change that would break a workflow already
// running fails here with a non-determinism error. An empty dir fails:
// a package that keeps histories must keep at least one.
func Histories(t *testing.T, dir string, register func(worker.WorkflowRegistry)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in %s", dir)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep := worker.NewWorkflowReplayer()
			register(rep)
			require.NoError(t, rep.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
