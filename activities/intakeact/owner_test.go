package intakeact

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/karvifake"
)

// The intake of board B (ownerB) and of another board A (ownerA), as the
// intake workflow names itself to its activities.
const (
	ownerA = "karvi-intake-127.0.0.1-1111/first-run-a"
	ownerB = "karvi-intake-127.0.0.1-2222/first-run-b"
)

// board reads the fake's board as the follower hands it to Reconcile.
func readBoard(t *testing.T, k *karvifake.Server) intake.Board {
	t.Helper()
	kc, err := karvi.New(k.URL(), token)
	require.NoError(t, err)
	raw, err := kc.GetBoard(context.Background())
	require.NoError(t, err)
	trimmed, err := Trim(raw)
	require.NoError(t, err)
	b, err := intake.DecodeBoard(trimmed)
	require.NoError(t, err)
	return b
}

func intakeOn(tc *fakeTemporal) *Activities {
	return &Activities{Temporal: tc, Karvi: func(u string) (*karvi.Client, error) { return karvi.New(u, token) }}
}

// tick is one tick of the intake workflow for owner: Reconcile the board,
// carry out each action (a refused one refuses the claim, as the workflow
// records it), then the follower's check of which workflows ended.
func tick(t *testing.T, a *Activities, k *karvifake.Server, owner string, st intake.State) (intake.State, []string) {
	t.Helper()
	ctx := context.Background()
	acts, st := intake.Reconcile(readBoard(t, k), st, intake.Config{})
	var results []string
	for _, act := range acts {
		if act.Kind == intake.KindIgnore {
			continue
		}
		res, err := a.Apply(ctx, intakeapi.ApplyInput{BoardURL: k.URL(), TaskQueue: "q", Owner: owner, Action: act})
		require.NoError(t, err, "apply %s %s", act.Kind, act.TaskID)
		results = append(results, string(act.Kind)+" "+act.TaskID+": "+res.Result)
		if res.Refused != "" {
			st = st.Refused(act.TaskID, res.Refused)
		}
	}
	ended, err := a.ended(ctx, st, owner)
	require.NoError(t, err)
	for _, e := range ended {
		st = st.EndedAs(e.TaskID, e.Final, e.RunID)
	}
	return st, results
}

func claimOf(t *testing.T, st intake.State, id string) intake.Claim {
	t.Helper()
	c, ok := st.Claim(id)
	require.True(t, ok, "claim of %s", id)
	return c
}

// A board task whose workflow id ran here before (a board restored or
// replaced with ids karvi reuses, a task first run with `starter start`)
// is run: the intake starts it anew after the closed workflow, at the
// attempt after that one's, rather than taking the old end for its own.
func TestIntakeRunsABoardTaskWhoseWorkflowIDRanBefore(t *testing.T) {
	tc := newFakeTemporal()
	tc.add(fakeRun{id: "karvi-task-T5", status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		result: &taskapi.Result{Attempt: 1, Outcome: mapping.Outcome{TaskStatus: "completed"}}})
	k := fake(t, ours("T5"))
	a := intakeOn(tc)

	st, results := tick(t, a, k, ownerB, intake.State{})
	require.Len(t, results, 1)
	require.Contains(t, results[0], "start T5: ")
	require.Equal(t, intake.PhaseRunning, claimOf(t, st, "T5").Phase, "%s", results[0])
	runs := tc.started("karvi-task-T5")
	require.Len(t, runs, 1, "the board's task is run (%s)", results[0])
	require.Equal(t, 2, runs[0].input.(taskapi.TaskInput).Attempt, "the attempt after the closed workflow's")
	require.Contains(t, results[0], "already ran")

	// Later ticks: the claim follows its own workflow, not the old one.
	st, _ = tick(t, a, k, ownerB, st)
	require.Equal(t, intake.PhaseRunning, claimOf(t, st, "T5").Phase)
	require.Len(t, tc.started("karvi-task-T5"), 1, "started once")
	tk, _ := k.Task("T5")
	require.Equal(t, "dispatched", tk.Status, "not blocked")
}

// A board task whose workflow id is running and was not started by this
// intake for it (a `starter start` by hand, another board's intake) is
// not adopted: the task is blocked on karvi with the reason naming the
// workflow, and the intake's claim is refused, not running.
func TestIntakeBlocksABoardTaskWhoseWorkflowIDRunsForSomeoneElse(t *testing.T) {
	for name, memo := range map[string]map[string]any{
		"started by hand":     nil,
		"another board's":     {MemoAttempt: 1, MemoClaim: ownerA + "#1"},
		"an older intake's":   {MemoAttempt: 1},
		"this intake's other": {MemoAttempt: 1, MemoClaim: ownerB + "#9"},
	} {
		t.Run(name, func(t *testing.T) {
			tc := newFakeTemporal()
			other := tc.add(fakeRun{id: "karvi-task-T6", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, memo: memo})
			k := fake(t, ours("T6"))
			a := intakeOn(tc)

			st, results := tick(t, a, k, ownerB, intake.State{})
			require.Len(t, results, 1)
			c := claimOf(t, st, "T6")
			require.Equal(t, intake.PhaseRefused, c.Phase, "%s", results[0])
			require.Empty(t, tc.started("karvi-task-T6"), "someone else's workflow is not adopted or doubled")
			tk, _ := k.Task("T6")
			require.Equal(t, "blocked", tk.Status)
			require.NotNil(t, tk.Blocker)
			require.Contains(t, tk.Blocker.Reason, "karvi-task-T6")
			require.Contains(t, tk.Blocker.Reason, other.runID)
			require.Contains(t, tk.Blocker.Reason, "not started by this intake")
			require.Equal(t, tk.Blocker.Reason, c.Reason)

			// Seen again: nothing more is done.
			st, results = tick(t, a, k, ownerB, st)
			require.Empty(t, results)
			require.Equal(t, intake.PhaseRefused, claimOf(t, st, "T6").Phase)
		})
	}
}

// A start carried out twice (the worker killed after the start, before
// its answer was recorded) finds its own workflow: done, one run.
func TestIntakeStartRetriedFindsItsOwnWorkflow(t *testing.T) {
	tc := newFakeTemporal()
	k := fake(t, ours("T7"))
	a := intakeOn(tc)
	acts, st := intake.Reconcile(readBoard(t, k), intake.State{}, intake.Config{})
	require.Len(t, acts, 1)
	in := intakeapi.ApplyInput{BoardURL: k.URL(), TaskQueue: "q", Owner: ownerB, Action: acts[0]}
	first, err := a.Apply(context.Background(), in)
	require.NoError(t, err)
	require.Contains(t, first.Result, "started karvi-task-T7")
	again, err := a.Apply(context.Background(), in)
	require.NoError(t, err)
	require.Empty(t, again.Refused)
	require.Contains(t, again.Result, "already started")
	require.Len(t, tc.started("karvi-task-T7"), 1)
	ended, err := a.ended(context.Background(), st, ownerB)
	require.NoError(t, err)
	require.Empty(t, ended)
}

// A cancel on board B never aborts a workflow of board A of the same task
// id: B's workflow for T1 ended, A's intake then started its own T1, and
// B's claim (not yet seen ended) is cancelled on B's board.
func TestIntakeCancelOnOneBoardLeavesAnotherBoardsTask(t *testing.T) {
	tc := newFakeTemporal()
	k := fake(t, ours("T1"))
	a := intakeOn(tc)
	acts, st := intake.Reconcile(readBoard(t, k), intake.State{}, intake.Config{})
	require.Len(t, acts, 1)
	_, err := a.Apply(context.Background(), intakeapi.ApplyInput{BoardURL: k.URL(), TaskQueue: "q", Owner: ownerB, Action: acts[0]})
	require.NoError(t, err)
	tc.mu.Lock()
	tc.latest("karvi-task-T1").status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	tc.mu.Unlock()
	tc.add(fakeRun{id: "karvi-task-T1", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		memo: map[string]any{MemoAttempt: 1, MemoClaim: ownerA + "#1"}})
	require.NoError(t, k.SetStatus("T1", "cancelled", "not needed"))

	acts, _ = intake.Reconcile(readBoard(t, k), st, intake.Config{})
	require.Len(t, acts, 1)
	require.Equal(t, intake.KindAbort, acts[0].Kind)
	res, err := a.Apply(context.Background(), intakeapi.ApplyInput{BoardURL: k.URL(), TaskQueue: "q", Owner: ownerB, Action: acts[0]})
	require.NoError(t, err)
	require.Empty(t, tc.signalled(), "board A's workflow is not aborted")
	require.Contains(t, res.Result, "not aborted")

	// B's follower sees its own workflow closed, not A's running one.
	ended, err := a.ended(context.Background(), st, ownerB)
	require.NoError(t, err)
	require.Len(t, ended, 1)
	require.Equal(t, "T1", ended[0].TaskID)
}

// A task sent back on board B whose workflow id now runs for board A is
// not signalled: B's task is blocked with the reason.
func TestIntakeRedispatchLeavesAnotherBoardsTask(t *testing.T) {
	tc := newFakeTemporal()
	k := fake(t, ours("T2"))
	a := intakeOn(tc)
	st, _ := tick(t, a, k, ownerB, intake.State{})
	tc.mu.Lock()
	mine := tc.latest("karvi-task-T2")
	mine.status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	mine.result = &taskapi.Result{Attempt: 1, Outcome: mapping.Outcome{TaskStatus: "completed"}}
	tc.mu.Unlock()
	require.NoError(t, k.SetStatus("T2", "in_progress", ""))
	require.NoError(t, k.SetStatus("T2", "completed", ""))
	st, _ = tick(t, a, k, ownerB, st)
	require.Equal(t, intake.PhaseEnded, claimOf(t, st, "T2").Phase)

	tc.add(fakeRun{id: "karvi-task-T2", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		memo: map[string]any{MemoAttempt: 1, MemoClaim: ownerA + "#4"}})
	require.NoError(t, k.SetStatus("T2", "needs_revision", "try again"))
	require.NoError(t, k.SetStatus("T2", "in_progress", ""))
	st, results := tick(t, a, k, ownerB, st)
	require.Len(t, results, 1)
	require.Contains(t, results[0], "redispatch T2: ")
	require.Empty(t, tc.signalled(), "board A's workflow gets no redispatch")
	require.Equal(t, intake.PhaseRefused, claimOf(t, st, "T2").Phase)
	tk, _ := k.Task("T2")
	require.Equal(t, "blocked", tk.Status)
}

// A task of a run is the run's when the run started its workflow (its
// parent): a cancel reaches that one only, and the follower neither takes
// a workflow of the same id that someone else runs for the run's task's
// end nor aborts it for the run.
func TestIntakeRunTaskIsKnownByItsRun(t *testing.T) {
	tc := newFakeTemporal()
	foreign := tc.add(fakeRun{id: "karvi-task-R1", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING})
	a := intakeOn(tc)
	claim := intake.Claim{TaskID: "R1", RunWorkflowID: "karvi-run-p", Phase: intake.PhaseRunning, Attempt: 1, Key: 3, Aborted: true}
	abort := intakeapi.ApplyInput{Owner: ownerB, Action: intake.Action{Kind: intake.KindAbort, TaskID: "R1",
		WorkflowID: "karvi-run-p", Key: 3, Reason: "cancelled on the board"}}
	res, err := a.Apply(context.Background(), abort)
	require.NoError(t, err)
	require.Contains(t, res.Result, "not aborted: karvi-task-R1 (run "+foreign.runID+") was not started by run karvi-run-p")
	ended, err := a.ended(context.Background(), intake.State{Claims: []intake.Claim{claim}}, ownerB)
	require.NoError(t, err)
	require.Empty(t, ended)
	require.Empty(t, tc.signalled(), "someone else's workflow is not aborted")

	// The run starts its own: the follower aborts that one.
	tc.mu.Lock()
	foreign.status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	tc.mu.Unlock()
	child := tc.add(fakeRun{id: "karvi-task-R1", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, parent: "karvi-run-p"})
	ended, err = a.ended(context.Background(), intake.State{Claims: []intake.Claim{claim}}, ownerB)
	require.NoError(t, err)
	require.Empty(t, ended)
	require.Equal(t, []fakeSignal{{id: "karvi-task-R1", runID: child.runID, name: taskapi.SignalAbort}}, tc.signalled())
	res, err = a.Apply(context.Background(), abort)
	require.NoError(t, err)
	require.Equal(t, "sent abort to karvi-task-R1 (a task of run karvi-run-p)", res.Result)
}

// A project whose run workflow id is someone else's is refused: its
// tasks are blocked on karvi with the reason, and the answer says so.
func TestIntakeRefusesARunWhoseWorkflowIDIsTaken(t *testing.T) {
	tc := newFakeTemporal()
	k := fake(t, ours("P1"))
	b := readBoard(t, k)
	b.TaskPlan.Tasks[0].ProjectID = "PROJ-1"
	b.Projects = []intake.Project{{ID: "PROJ-1", Title: "p", Repo: "r", Status: intake.ProjectExecuting, TaskIDs: []string{"P1"}}}
	acts, st := intake.Reconcile(b, intake.State{}, intake.Config{})
	require.Len(t, acts, 1)
	require.Equal(t, intake.KindStartRun, acts[0].Kind)
	other := tc.add(fakeRun{id: acts[0].WorkflowID, status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED})
	a := intakeOn(tc)
	res, err := a.Apply(context.Background(), intakeapi.ApplyInput{BoardURL: k.URL(), TaskQueue: "q", Owner: ownerB, Action: acts[0]})
	require.NoError(t, err)
	require.Contains(t, res.Refused, "run workflow "+acts[0].WorkflowID+" already ran (completed) (run "+other.runID+")")
	st = st.RefusedRun("PROJ-1", res.Refused)
	require.Equal(t, intake.PhaseRefused, claimOf(t, st, "P1").Phase)
	tk, _ := k.Task("P1")
	require.Equal(t, "blocked", tk.Status)
	require.Equal(t, res.Refused, tk.Blocker.Reason)
	require.Len(t, tc.runs[acts[0].WorkflowID], 1, "not started")
}
