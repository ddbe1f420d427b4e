//go:build realserver

package testrig

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// StartRun starts a run workflow on the rig's queue. Cleanup closes it and
// every task workflow it may have started.
func (r *Rig) StartRun(in runapi.RunInput) (client.WorkflowRun, runplan.Run) {
	r.t.Helper()
	run, err := runplan.Parse(in.Run)
	require.NoError(r.t, err)
	id := runapi.WorkflowID(run.Slug)
	wr, err := r.Runs().Start(context.Background(), in, runapi.StartOptions{})
	require.NoError(r.t, err)
	r.Track(id)
	for _, t := range run.Tasks {
		r.Track(runapi.TaskWorkflowID(t.ID))
	}
	return wr, run
}

// Runs is the run workflows' client on the rig's queue.
func (r *Rig) Runs() runapi.Runs {
	return runapi.Runs{Client: r.Client, TaskQueue: r.Queue}
}

// RunResult waits for a run's final document; the deadline only keeps a
// hung test from hanging the suite.
func (r *Rig) RunResult(wr client.WorkflowRun, within time.Duration) runstatus.Status {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var doc runstatus.Status
	require.NoError(r.t, wr.Get(ctx, &doc))
	return doc
}

// RunView queries a run's view.
func (r *Rig) RunView(slug string) runapi.View {
	r.t.Helper()
	return Query[runapi.View](r, runapi.WorkflowID(slug), runapi.QueryView)
}

// WaitRun polls the run's view until cond holds (what names it in the
// failure message), for at most two minutes.
func (r *Rig) WaitRun(slug, what string, cond func(runapi.View) bool) runapi.View {
	r.t.Helper()
	return waitFor(r, "run "+slug, what, func() runapi.View { return r.RunView(slug) }, cond,
		func(v runapi.View) any { return v.Status })
}

// UpdateRun sends one of the run's updates, with its argument if any,
// and returns its answer.
func (r *Rig) UpdateRun(slug, name string, arg ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var a any
	if len(arg) > 0 {
		a = arg[0]
	}
	return r.Runs().Update(ctx, slug, name, a)
}
