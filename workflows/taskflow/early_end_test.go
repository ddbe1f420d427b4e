package taskflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/api/task"
)

// earlyParent starts a task workflow as its child, as a run does, and
// notes when the task told it of its end and when the child closed.
func earlyParent(ctx workflow.Context, in taskapi.TaskInput) ([]string, error) {
	start := workflow.Now(ctx)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: "karvi-task-" + in.Dispatch.TaskID})
	f := workflow.ExecuteChildWorkflow(cctx, taskapi.TaskWorkflowName, in)
	ch := workflow.GetSignalChannel(ctx, taskapi.SignalTaskEnded)
	var out []string
	closed := false
	for !closed {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var e taskapi.TaskEnded
			c.Receive(ctx, &e)
			out = append(out, fmt.Sprintf("%s told %s#%d reached %d: %s", workflow.Now(ctx).Sub(start), e.Task, e.Attempt, e.Reached, e.Summary))
		})
		sel.AddFuture(f, func(f workflow.Future) {
			var res taskapi.Result
			err := f.Get(ctx, &res)
			out = append(out, fmt.Sprintf("%s closed %s (%v)", workflow.Now(ctx).Sub(start), res.Outcome.TaskStatus, err))
			closed = true
		})
		sel.Select(ctx)
	}
	return out, nil
}

// A run's task tells its run that it completed as soon as it has the
// terminal event, before its final status write: the run starts the
// dependents while the write is under way.
func TestTaskTellsItsRunOfTheCompletionBeforeTheStatusWrite(t *testing.T) {
	env := newEnv(t)
	env.RegisterWorkflow(earlyParent)
	f := &fakeConductor{t: t, events: loadEvents(t, "../../testdata/examples/A/events.snake.jsonl"), perBatch: 100, statusAfter: time.Minute}
	f.register(env)
	env.ExecuteWorkflow(earlyParent, taskapi.TaskInput{Dispatch: exampleDispatch(t), Attempt: 1})
	require.NoError(t, env.GetWorkflowError())
	var out []string
	require.NoError(t, env.GetWorkflowResult(&out))
	require.Len(t, out, 2, "%v", out)
	require.Contains(t, out[0], "told T5#1 reached 1: 3/3 phases completed")
	require.Contains(t, out[1], "closed completed (<nil>)")
	told, err := time.ParseDuration(firstWord(out[0]))
	require.NoError(t, err)
	closed, err := time.ParseDuration(firstWord(out[1]))
	require.NoError(t, err)
	require.GreaterOrEqual(t, closed-told, time.Minute, "told after the status write: %v", out)
}

func firstWord(s string) string {
	for i, c := range s {
		if c == ' ' {
			return s[:i]
		}
	}
	return s
}
