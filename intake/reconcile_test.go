package intake

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
)

func task(id, status string, hist ...string) Task {
	t := Task{ID: id, Title: "title " + id, Status: status, RuntimeHint: "edda", Assignee: "human-ops"}
	for _, h := range hist {
		t.History = append(t.History, HistoryEntry{Status: h, By: "human"})
	}
	return t
}

func board(v int64, tasks ...Task) Board {
	return Board{Version: v, TaskPlan: TaskPlan{Tasks: tasks},
		Participants: []Participant{{ID: "human-ops", Type: "human"}, {ID: "bot", Type: "agent"}}}
}

// kinds lists actions as "kind task/project" for compact comparison.
func kinds(as []Action) []string {
	var out []string
	for _, a := range as {
		id := a.TaskID
		if id == "" {
			id = a.ProjectID
		}
		out = append(out, string(a.Kind)+" "+id)
	}
	return out
}

func TestReconcileRealBoard(t *testing.T) {
	b := loadBoard(t)
	acts, st := Reconcile(b, State{}, Config{})
	assert.Equal(t, []string{"start T2", "ignore T4"}, kinds(acts))
	assert.Equal(t, "karvi-task-T2", acts[0].WorkflowID)
	require.NotNil(t, acts[0].Dispatch)
	assert.Equal(t, 1, acts[0].Attempt)
	assert.Contains(t, acts[1].Reason, "cancelled on a task this runtime never claimed")
	c, ok := st.Claim("T2")
	require.True(t, ok)
	assert.Equal(t, Claim{TaskID: "T2", Phase: PhaseRunning, Attempt: 1, Mark: 2, Key: 1}, c)
	assert.Equal(t, int64(42), st.Version)

	// The same board again (karvi sometimes sends it twice): no new claim.
	acts, st2 := Reconcile(b, st, Config{})
	assert.Equal(t, []string{"ignore T4"}, kinds(acts))
	assert.Equal(t, st, st2)
}

func TestReconcileStaleBoard(t *testing.T) {
	_, st := Reconcile(board(5, task("A", StatusDispatched)), State{}, Config{})
	acts, st2 := Reconcile(board(4, task("A", StatusDispatched), task("B", StatusDispatched)), st, Config{})
	require.Len(t, acts, 1)
	assert.Equal(t, KindIgnore, acts[0].Kind)
	assert.Equal(t, "stale board: _version 4 is older than 5 already seen", acts[0].Reason)
	assert.Equal(t, st.Claims, st2.Claims)
	assert.Equal(t, int64(5), st2.Version)
	assert.Equal(t, 1, st2.Stale)
}

func TestReconcileCancelAbortsOnce(t *testing.T) {
	_, st := Reconcile(board(1, task("A", StatusDispatched, "dispatched")), State{}, Config{})
	cancelled := task("A", StatusCancelled, "dispatched", "in_progress", "cancelled")
	cancelled.History[2].Reason = "wrong repo"
	acts, st := Reconcile(board(3, cancelled), st, Config{})
	require.Equal(t, []string{"abort A"}, kinds(acts))
	assert.Equal(t, "karvi-task-A", acts[0].WorkflowID)
	assert.Equal(t, "cancelled on the board: wrong repo", acts[0].Reason)
	acts, st = Reconcile(board(4, cancelled), st, Config{})
	assert.Empty(t, acts)
	// karvi deletes the cancelled task after an hour: the claim goes.
	st = st.Ended("A", StatusBlocked)
	acts, st = Reconcile(board(5), st, Config{})
	assert.Empty(t, acts)
	assert.Empty(t, st.Claims)
}

func TestReconcileDeletedWhileRunning(t *testing.T) {
	_, st := Reconcile(board(1, task("A", StatusDispatched)), State{}, Config{})
	acts, st := Reconcile(board(2), st, Config{})
	require.Equal(t, []string{"abort A"}, kinds(acts))
	assert.Equal(t, "task deleted from the board while it ran", acts[0].Reason)
	assert.Empty(t, st.Claims)
}

func TestReconcileRedispatch(t *testing.T) {
	h := []string{"dispatched"}
	_, st := Reconcile(board(1, task("A", StatusDispatched, h...)), State{}, Config{})

	// Running, board shows in_progress: nothing.
	acts, st := Reconcile(board(2, task("A", StatusInProgress, "dispatched", "in_progress")), st, Config{})
	assert.Empty(t, acts)
	// The workflow ended; a board from before its last write still says
	// in_progress: nothing either.
	st = st.Ended("A", StatusCompleted)
	acts, st = Reconcile(board(3, task("A", StatusInProgress, "dispatched", "in_progress")), st, Config{})
	assert.Empty(t, acts)
	// The board shows it completed, then sent back (review wrote
	// needs_revision without an event, then a person moved it on; the
	// history was trimmed so only the status tells).
	acts, st = Reconcile(board(4, task("A", StatusCompleted)), st, Config{})
	assert.Empty(t, acts)
	acts, st = Reconcile(board(6, task("A", StatusInProgress)), st, Config{})
	require.Equal(t, []string{"redispatch A"}, kinds(acts))
	d := acts[0].Dispatch
	require.NotNil(t, d)
	assert.Equal(t, mapping.ModeRedispatch, d.Mode)
	assert.Equal(t, "intake-A-2", d.PlanID)
	assert.Equal(t, 2, acts[0].Attempt)
	assert.Equal(t, "karvi-task-A", acts[0].WorkflowID)
	c, _ := st.Claim("A")
	assert.Equal(t, PhaseRunning, c.Phase)
	// Again the same board: no second redispatch.
	acts, _ = Reconcile(board(6, task("A", StatusInProgress)), st, Config{})
	assert.Empty(t, acts)
}

func TestReconcileRedispatchSeenOnlyInHistory(t *testing.T) {
	_, st := Reconcile(board(1, task("A", StatusDispatched, "dispatched")), State{}, Config{})
	st = st.Ended("A", StatusCompleted)
	back := task("A", StatusInProgress, "dispatched", "in_progress", "completed", "needs_revision", "in_progress")
	back.History[3].Reason = "tests fail"
	acts, st := Reconcile(board(9, back), st, Config{})
	require.Equal(t, []string{"redispatch A"}, kinds(acts))
	assert.Equal(t, "sent back by the board: tests fail", acts[0].Reason)
	c, _ := st.Claim("A")
	assert.Equal(t, 5, c.Mark)
	// Ends again, sent back again: the old needs_revision before the mark
	// does not count, the new one does.
	st = st.Ended("A", StatusCompleted)
	acts, st = Reconcile(board(10, back), st, Config{})
	assert.Empty(t, acts)
	again := task("A", StatusInProgress, "dispatched", "in_progress", "completed", "needs_revision", "in_progress", "completed", "needs_revision", "in_progress")
	acts, _ = Reconcile(board(11, again), st, Config{})
	require.Equal(t, []string{"redispatch A"}, kinds(acts))
	assert.Equal(t, 3, acts[0].Attempt)
}

func TestReconcileBadInputBlocksOnce(t *testing.T) {
	bad := task("A", StatusDispatched, "dispatched")
	bad.Skill = "Not A Skill"
	acts, st := Reconcile(board(1, bad), State{}, Config{})
	require.Equal(t, []string{"block A"}, kinds(acts))
	assert.Contains(t, acts[0].Reason, "task A: skill: ")
	c, _ := st.Claim("A")
	assert.Equal(t, PhaseRefused, c.Phase)
	// Our block lands (in_progress, then blocked): nothing more.
	blocked := bad
	blocked.Status = StatusBlocked
	blocked.History = append(blocked.History, HistoryEntry{Status: "in_progress"}, HistoryEntry{Status: "blocked"})
	acts, st = Reconcile(board(3, blocked), st, Config{})
	assert.Empty(t, acts)
	// Even a snapshot between the two writes does not take it again.
	acts, _ = Reconcile(board(3, bad), st, Config{})
	assert.Empty(t, acts)
	// The user fixes the skill and moves it on: taken again, as new.
	fixed := blocked
	fixed.Skill, fixed.Status = "go-dev", StatusDispatched
	fixed.History = append(fixed.History, HistoryEntry{Status: "dispatched", From: "blocked"})
	acts, _ = Reconcile(board(5, fixed), st, Config{})
	require.Equal(t, []string{"start A"}, kinds(acts))
	assert.Equal(t, 2, acts[0].Attempt)
	assert.Equal(t, "intake-A-2", acts[0].Dispatch.PlanID)
}

func TestReconcileAgentAssigneeWithAutoDispatch(t *testing.T) {
	a := task("A", StatusDispatched)
	a.Assignee = "bot"
	b := board(1, a)
	on := true
	b.Controls.AutoDispatch = &on
	acts, st := Reconcile(b, State{}, Config{})
	require.Equal(t, []string{"ignore A"}, kinds(acts))
	assert.Contains(t, acts[0].Reason, `assignee "bot" is a karvi agent and auto_dispatch is on`)
	assert.Empty(t, st.Claims)
	// With auto_dispatch off karvi leaves it alone.
	b.Controls.AutoDispatch = nil
	acts, _ = Reconcile(b, State{}, Config{})
	assert.Equal(t, []string{"start A"}, kinds(acts))
}

func TestReconcileForeignTasks(t *testing.T) {
	f := task("F", StatusCancelled)
	f.RuntimeHint = "openclaw"
	g := task("G", StatusDispatched)
	g.RuntimeHint = ""
	acts, st := Reconcile(board(1, f, g), State{}, Config{})
	require.Equal(t, []string{"ignore F"}, kinds(acts))
	assert.Equal(t, `cancelled on a task routed to "openclaw", not "edda"`, acts[0].Reason)
	assert.Empty(t, st.Claims)
}

func project(id, status string, ids ...string) Project {
	return Project{ID: id, Title: "Project " + id, Repo: "org/repo", Status: status, Concurrency: 2, TaskIDs: ids}
}

func withProject(t Task, p string, deps ...string) Task {
	t.ProjectID, t.Depends = p, deps
	return t
}

func TestReconcileProjectBecomesARun(t *testing.T) {
	b := board(1,
		withProject(task("P1", StatusDispatched), "PROJ-1"),
		withProject(task("P2", StatusPending), "PROJ-1", "P1"),
		task("S", StatusDispatched))
	b.Projects = []Project{project("PROJ-1", ProjectExecuting, "P1", "P2")}
	acts, st := Reconcile(b, State{}, Config{})
	require.Equal(t, []string{"start_run PROJ-1", "start S"}, kinds(acts))
	run, err := runplan.Parse(acts[0].RunFile)
	require.NoError(t, err)
	assert.Equal(t, run.WorkflowID(), acts[0].WorkflowID)
	assert.Equal(t, 2, run.Concurrency)
	assert.Equal(t, [][]string{{"P1"}, {"P2"}}, run.Order())
	assert.False(t, acts[0].Paused)
	for _, id := range []string{"P1", "P2"} {
		c, ok := st.Claim(id)
		require.True(t, ok, id)
		assert.Equal(t, run.WorkflowID(), c.RunWorkflowID)
	}

	// Nothing new on the same board; pause and resume once each.
	acts, st = Reconcile(b, st, Config{})
	assert.Empty(t, acts)
	b.Version, b.Projects[0].Status = 2, ProjectPaused
	acts, st = Reconcile(b, st, Config{})
	require.Equal(t, []string{"pause_run PROJ-1"}, kinds(acts))
	acts, st = Reconcile(b, st, Config{})
	assert.Empty(t, acts)
	b.Version, b.Projects[0].Status = 3, ProjectExecuting
	acts, st = Reconcile(b, st, Config{})
	require.Equal(t, []string{"resume_run PROJ-1"}, kinds(acts))

	// A run task cancelled: abort goes to the run.
	b.Version = 4
	b.TaskPlan.Tasks[1].Status = StatusCancelled
	acts, st = Reconcile(b, st, Config{})
	require.Equal(t, []string{"abort P2"}, kinds(acts))
	assert.Equal(t, run.WorkflowID(), acts[0].WorkflowID)

	// A task joins the project later: refused once, blocked when karvi
	// allows it (dispatched), only logged when it does not (pending).
	b.Version = 5
	b.TaskPlan.Tasks = append(b.TaskPlan.Tasks,
		withProject(task("L1", StatusDispatched), "PROJ-1"),
		withProject(task("L2", StatusPending), "PROJ-1", "L1"))
	acts, st = Reconcile(b, st, Config{})
	require.Equal(t, []string{"block L1", "ignore L2"}, kinds(acts))
	assert.Contains(t, acts[0].Reason, "task L1 joined project PROJ-1 after its run "+run.WorkflowID()+" started")
	acts, st = Reconcile(b, st, Config{})
	assert.Empty(t, acts)

	// The project goes from the board: the run claim goes too.
	b.Version, b.Projects = 6, nil
	_, st = Reconcile(b, st, Config{})
	assert.Empty(t, st.Runs)
}

func TestReconcileProjectStartsPaused(t *testing.T) {
	b := board(1, withProject(task("P1", StatusDispatched), "PROJ-1"))
	b.Projects = []Project{project("PROJ-1", ProjectPaused, "P1")}
	acts, _ := Reconcile(b, State{}, Config{})
	require.Equal(t, []string{"start_run PROJ-1"}, kinds(acts))
	assert.True(t, acts[0].Paused)
}

func TestReconcileProjectRefused(t *testing.T) {
	foreign := withProject(task("P2", StatusDispatched), "PROJ-1")
	foreign.RuntimeHint = "openclaw"
	for _, tc := range []struct {
		name   string
		tasks  []Task
		ids    []string
		reason string
		blocks []string
	}{
		{"mixed runtimes", []Task{withProject(task("P1", StatusDispatched), "PROJ-1"), foreign}, []string{"P1", "P2"},
			`its tasks P1 are routed to "edda" but P2 are not`, []string{"P1"}},
		{"listed task missing", []Task{withProject(task("P1", StatusDispatched), "PROJ-1")}, []string{"P1", "P9"},
			"taskIds lists tasks not on the board: P9", []string{"P1"}},
		{"already taken", []Task{withProject(task("P1", StatusInProgress), "PROJ-1")}, []string{"P1"},
			"task P1 is already in_progress: someone else took it", nil},
		{"unknown dependency", []Task{withProject(task("P1", StatusPending), "PROJ-1", "nope"), withProject(task("P3", StatusDispatched), "PROJ-1")}, []string{"P1", "P3"},
			"task P1 depends on unknown task nope", []string{"P3"}},
	} {
		b := board(1, tc.tasks...)
		b.Projects = []Project{project("PROJ-1", ProjectExecuting, tc.ids...)}
		acts, st := Reconcile(b, State{}, Config{})
		want := []string{}
		for _, id := range tc.blocks {
			want = append(want, "block "+id)
		}
		want = append(want, "ignore PROJ-1")
		require.Equal(t, want, kinds(acts), tc.name)
		assert.Contains(t, acts[len(acts)-1].Reason, tc.reason, tc.name)
		rc, ok := st.Run("PROJ-1")
		require.True(t, ok, tc.name)
		assert.NotEmpty(t, rc.Refused, tc.name)
		acts, _ = Reconcile(b, st, Config{})
		assert.Empty(t, acts, "%s: reported once", tc.name)
	}
}

func TestReconcileOrderIsFixed(t *testing.T) {
	_, st := Reconcile(board(1, task("Z", StatusDispatched)), State{}, Config{})
	b := board(2, task("C", StatusDispatched), task("B", StatusDispatched), task("Z", StatusCancelled))
	acts, _ := Reconcile(b, st, Config{})
	assert.Equal(t, []string{"abort Z", "start B", "start C"}, kinds(acts))
}

func TestStateEncodes(t *testing.T) {
	b := loadBoard(t)
	_, st := Reconcile(b, State{}, Config{})
	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":42,"lastKey":1,"claims":[{"taskId":"T2","phase":"running","attempt":1,"mark":2,"key":1}]}`, string(data))
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, st, back)
	assert.Equal(t, st, st.Ended("nope", StatusCompleted), "an unknown task's end changes nothing")
}

// karvi's _version can go back for good (board.json restored or replaced):
// after StaleLimit boards in a row older than the cursor, the intake takes
// the board as its new baseline rather than ignoring karvi forever.
func TestReconcileVersionWentBack(t *testing.T) {
	_, st := Reconcile(board(50, task("A", StatusDispatched)), State{}, Config{})
	restored := board(3, task("A", StatusDispatched), task("B", StatusDispatched))
	var acts []Action
	for i := 1; i < StaleLimit; i++ {
		acts, st = Reconcile(restored, st, Config{})
		require.Equal(t, []string{"ignore "}, kinds(acts), "stale #%d", i)
	}
	acts, st = Reconcile(restored, st, Config{})
	require.Equal(t, []string{"start B", "ignore "}, kinds(acts))
	assert.Contains(t, acts[1].Reason, "_version went back from 50 to 3")
	assert.Equal(t, int64(3), st.Version)
	assert.Zero(t, st.Stale)
	// A fresh board in between resets the count.
	_, st = Reconcile(board(9, task("A", StatusDispatched), task("B", StatusInProgress)), st, Config{})
	_, st = Reconcile(board(8), st, Config{})
	assert.Equal(t, 1, st.Stale)
	_, st = Reconcile(board(10, task("A", StatusDispatched), task("B", StatusInProgress)), st, Config{})
	assert.Zero(t, st.Stale)
}

// A task of ours with a field of the wrong type is blocked with the field
// named, not passed over as if routed elsewhere.
func TestReconcileUndecodableTaskOfOursIsBlocked(t *testing.T) {
	b, err := DecodeBoard([]byte(`{"_version":1,"taskPlan":{"tasks":[
		{"id":"B","title":"bad","status":"dispatched","runtimeHint":"edda","depends":"A"},
		{"id":"C","title":"other","status":"dispatched","runtimeHint":"openclaw","depends":"A"}]}}`))
	require.NoError(t, err)
	acts, st := Reconcile(b, State{}, Config{})
	require.Equal(t, []string{"block B"}, kinds(acts))
	assert.Equal(t, "task B: depends: must be an array, got string", acts[0].Reason)
	c, _ := st.Claim("B")
	assert.Equal(t, PhaseRefused, c.Phase)
}

// A task sent back whose fields no longer make a plan is blocked with the
// field named, as one of its attempts, not claimed anew.
func TestReconcileRedispatchWithBadPlanBlocks(t *testing.T) {
	_, st := Reconcile(board(1, task("A", StatusDispatched, "dispatched")), State{}, Config{})
	st = st.Ended("A", StatusCompleted)
	back := task("A", StatusInProgress, "dispatched", "in_progress", "completed", "needs_revision", "in_progress")
	back.Skill = "Bad Skill"
	acts, st := Reconcile(board(2, back), st, Config{})
	require.Equal(t, []string{"block A"}, kinds(acts))
	assert.Equal(t, 2, acts[0].Attempt)
	assert.Contains(t, acts[0].Reason, "task A: skill: ")
	c, _ := st.Claim("A")
	assert.Equal(t, PhaseRefused, c.Phase)
}

// The claim keeps the run id of the workflow whose end it recorded.
func TestEndedKeepsTheWorkflowsRunID(t *testing.T) {
	st := State{Claims: []Claim{{TaskID: "A", Phase: PhaseRunning, Attempt: 1}}}
	st = st.EndedAs("A", StatusCompleted, "run-1")
	require.Equal(t, PhaseEnded, st.Claims[0].Phase)
	require.Equal(t, "run-1", st.Claims[0].EndedRunID)
}
