package taskflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
)

// readLog records the reads that reached a worker.
type readLog struct {
	mu   sync.Mutex
	reqs []taskact.ReadEventsRequest
}

func (l *readLog) all() []taskact.ReadEventsRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]taskact.ReadEventsRequest(nil), l.reqs...)
}

func newEventsEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *readLog) {
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
	env.RegisterActivity(acts)
	reqs := &readLog{}
	// A stream of 3-byte lines "e0\n", "e1\n", ...: a page is the line at
	// the offset.
	env.OnActivity(acts.ReadEvents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req taskact.ReadEventsRequest) (taskact.ReadEventsResult, error) {
			reqs.mu.Lock()
			defer reqs.mu.Unlock()
			reqs.reqs = append(reqs.reqs, req)
			return taskact.ReadEventsResult{Lines: []string{fmt.Sprintf("e%d", req.Offset/3)}, Next: req.Offset + 3}, nil
		})
	return env, reqs
}

type updateResult struct {
	page     taskapi.EventsPage
	err      error
	rejected error
}

func read(env *testsuite.TestWorkflowEnvironment, id string, req taskapi.EventsRead, out *updateResult) {
	env.UpdateWorkflow(taskapi.UpdateReadEvents, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) { out.rejected = err },
		OnComplete: func(v any, err error) {
			out.err = err
			if p, ok := v.(taskapi.EventsPage); ok {
				out.page = p
			}
		},
	}, req)
}

// The reader answers each read with a page of the task's stream, refuses a
// read no worker could serve, and ends once nobody reads.
func TestEventsWorkflowServesReadsThenEnds(t *testing.T) {
	env, reqs := newEventsEnv(t)
	var first, second, bad updateResult
	env.RegisterDelayedCallback(func() {
		read(env, "r1", taskapi.EventsRead{Offset: 0, Wait: time.Hour}, &first)
		read(env, "r2", taskapi.EventsRead{Offset: 3}, &second)
		read(env, "r3", taskapi.EventsRead{Offset: -1}, &bad)
	}, time.Second)
	env.ExecuteWorkflow(taskapi.EventsWorkflowName, taskapi.EventsInput{TaskID: "T5"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "it ends by itself once idle")

	require.NoError(t, first.err)
	require.Equal(t, taskapi.EventsPage{Lines: []string{"e0"}, Next: 3}, first.page)
	require.Equal(t, taskapi.EventsPage{Lines: []string{"e1"}, Next: 6}, second.page)
	require.Error(t, bad.rejected)
	got := reqs.all()
	require.Len(t, got, 2, "a refused read reaches no worker")
	// The two reads run at once: find the one that asked to wait.
	waited := got[0]
	if waited.Offset != 0 {
		waited = got[1]
	}
	require.Equal(t, "run-T5", waited.RunID)
	require.Equal(t, taskapi.MaxEventsWait, waited.MaxWait, "a wait is bounded")
}

// A reader that served many reads continues as new once they are done.
func TestEventsWorkflowContinuesAsNew(t *testing.T) {
	env, reqs := newEventsEnv(t)
	results := make([]updateResult, readerMaxReads)
	env.RegisterDelayedCallback(func() {
		for i := range results {
			read(env, fmt.Sprint("r", i), taskapi.EventsRead{Offset: int64(3 * i)}, &results[i])
		}
	}, time.Second)
	env.ExecuteWorkflow(taskapi.EventsWorkflowName, taskapi.EventsInput{TaskID: "T5"})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	require.Len(t, reqs.all(), readerMaxReads)
	for i, r := range results {
		require.NoError(t, r.err, "read %d", i)
		require.Equal(t, int64(3*i+3), r.page.Next, "read %d finished before continue-as-new", i)
	}
}

// Followers whose long polls overlap keep a read in flight at every
// moment. Once the reader decided to continue as new it admits no more
// reads (their clients read again from the new run), so the ones in
// flight finish and it does continue, instead of serving for as long as
// the polls overlap while its history grows.
func TestEventsWorkflowRefusesReadsOnceRenewing(t *testing.T) {
	env := newEnv(t)
	env.RegisterWorkflowWithOptions(EventsWorkflow, workflow.RegisterOptions{Name: taskapi.EventsWorkflowName})
	env.RegisterActivity(acts)
	served := 0
	var mu sync.Mutex
	env.OnActivity(acts.ReadEvents, mock.Anything, mock.Anything).After(10 * time.Second).Return(
		func(_ context.Context, req taskact.ReadEventsRequest) (taskact.ReadEventsResult, error) {
			mu.Lock()
			defer mu.Unlock()
			served++
			return taskact.ReadEventsResult{Next: req.Offset}, nil
		})
	first := make([]updateResult, readerMaxReads)
	late := make([]updateResult, 120)
	env.RegisterDelayedCallback(func() {
		for i := range first {
			read(env, fmt.Sprint("r", i), taskapi.EventsRead{Offset: 0, Wait: time.Second}, &first[i])
		}
	}, time.Second)
	// Two followers, each polling again every 5 s with 10 s polls.
	for i := range late {
		env.RegisterDelayedCallback(func() {
			read(env, fmt.Sprint("late", i), taskapi.EventsRead{Offset: 0, Wait: time.Second}, &late[i])
		}, time.Second+time.Duration(i+1)*5*time.Second)
	}
	env.ExecuteWorkflow(taskapi.EventsWorkflowName, taskapi.EventsInput{TaskID: "T5"})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "%v", env.GetWorkflowError())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, readerMaxReads, served, "reads admitted after the reader decided to continue as new")
	require.Error(t, late[0].rejected)
	require.Contains(t, late[0].rejected.Error(), "continuing as new")
}
