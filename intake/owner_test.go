package intake

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every claim gets a key never handed out before by this intake: the mark
// its workflows carry, so a workflow of the same id started by someone
// else (or for an older claim of a reused task id) is not taken for its.
// A redispatch keeps the claim's key; a task taken again after a refusal
// is a new claim with a new key.
func TestReconcileKeysEveryClaim(t *testing.T) {
	acts, st := Reconcile(board(1, task("A", StatusDispatched, "dispatched"), task("B", StatusDispatched, "dispatched")), State{}, Config{})
	require.Equal(t, []string{"start A", "start B"}, kinds(acts))
	assert.Equal(t, int64(1), acts[0].Key)
	assert.Equal(t, int64(2), acts[1].Key)
	assert.Equal(t, int64(1), claim(t, st, "A").Key)
	assert.Equal(t, int64(2), claim(t, st, "B").Key)
	assert.Equal(t, int64(2), st.LastKey)

	st = st.Ended("A", StatusCompleted)
	back := task("A", StatusInProgress, "dispatched", "in_progress", "completed", "needs_revision", "in_progress")
	acts, st = Reconcile(board(2, back, task("B", StatusInProgress, "dispatched", "in_progress")), st, Config{})
	require.Equal(t, []string{"redispatch A"}, kinds(acts))
	assert.Equal(t, int64(1), acts[0].Key, "a redispatch is the same claim")

	p := board(3, back, task("B", StatusInProgress, "dispatched", "in_progress"),
		withProject(task("P1", StatusDispatched), "PROJ-1"), withProject(task("P2", StatusPending), "PROJ-1", "P1"))
	p.Projects = []Project{project("PROJ-1", ProjectExecuting, "P1", "P2")}
	acts, st = Reconcile(p, st, Config{})
	require.Equal(t, []string{"start_run PROJ-1"}, kinds(acts))
	assert.Equal(t, int64(3), claim(t, st, "P1").Key)
	assert.Equal(t, int64(4), claim(t, st, "P2").Key)
	assert.Equal(t, int64(5), acts[0].Key, "the run's own key")
	rc, _ := st.Run("PROJ-1")
	assert.Equal(t, int64(5), rc.Key)
	assert.Equal(t, int64(5), st.LastKey)
}

func claim(t *testing.T, st State, id string) Claim {
	t.Helper()
	c, ok := st.Claim(id)
	require.True(t, ok, "claim of %s", id)
	return c
}

// A start refused (its workflow id runs for someone else) refuses the
// claim: it is not running, a cancel on the board aborts nothing, and the
// task is taken again, as a new claim, once a person moves it on from
// blocked.
func TestStateRefused(t *testing.T) {
	_, st := Reconcile(board(1, task("A", StatusDispatched, "dispatched")), State{}, Config{})
	const why = "workflow karvi-task-A is running (run r1) and was not started by this intake"
	st = st.Refused("A", why)
	c := claim(t, st, "A")
	assert.Equal(t, PhaseRefused, c.Phase)
	assert.Equal(t, why, c.Reason)
	assert.Equal(t, st, st.Refused("nope", why), "an unknown task changes nothing")
	assert.Equal(t, st, st.Refused("A", "again"), "a claim not running changes nothing")

	blocked := task("A", StatusBlocked, "dispatched", "in_progress", "blocked")
	acts, st := Reconcile(board(2, blocked), st, Config{})
	assert.Empty(t, acts)
	cancelled := task("A", StatusCancelled, "dispatched", "in_progress", "blocked", "cancelled")
	acts, _ = Reconcile(board(3, cancelled), st, Config{})
	assert.Empty(t, acts, "nothing of ours runs to abort")

	moved := task("A", StatusDispatched, "dispatched", "in_progress", "blocked", "dispatched")
	acts, st = Reconcile(board(3, moved), st, Config{})
	require.Equal(t, []string{"start A"}, kinds(acts))
	assert.Equal(t, 2, acts[0].Attempt)
	assert.Equal(t, int64(2), acts[0].Key)
	assert.Equal(t, PhaseRunning, claim(t, st, "A").Phase)
}

// A run refused at its start (its workflow id taken by someone else)
// refuses the run and every task claimed with it; the project is then
// left alone, as one refused by the rules.
func TestStateRefusedRun(t *testing.T) {
	b := board(1, withProject(task("P1", StatusDispatched), "PROJ-1"), withProject(task("P2", StatusPending), "PROJ-1", "P1"),
		task("S", StatusDispatched))
	b.Projects = []Project{project("PROJ-1", ProjectExecuting, "P1", "P2")}
	_, st := Reconcile(b, State{}, Config{})
	const why = "run workflow karvi-run-x is running and was not started by this intake"
	st = st.RefusedRun("PROJ-1", why)
	rc, ok := st.Run("PROJ-1")
	require.True(t, ok)
	assert.Equal(t, why, rc.Refused)
	for _, id := range []string{"P1", "P2"} {
		c := claim(t, st, id)
		assert.Equal(t, PhaseRefused, c.Phase, id)
		assert.Equal(t, why, c.Reason, id)
	}
	assert.Equal(t, PhaseRunning, claim(t, st, "S").Phase, "a task of no run is left")
	b.Version, b.Projects[0].Status = 2, ProjectPaused
	acts, _ := Reconcile(b, st, Config{})
	assert.Empty(t, acts, "no pause for a run that is not ours")
}
