//go:build realserver

package testrig

import (
	"context"
	"karvi-edda-temporal/testkit/wait"
	"time"

	"github.com/stretchr/testify/require"
)

// Query asks a workflow's query on the rig's client and decodes its answer
// as a T; an error fails the test.
func Query[T any](r *Rig, workflowID, name string) T {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := r.Client.QueryWorkflow(ctx, workflowID, "", name)
	require.NoError(r.t, err, "query %s of %s", name, workflowID)
	var out T
	require.NoError(r.t, v.Get(&out), "query %s of %s", name, workflowID)
	return out
}

// waitFor is WaitFor for the rig's own waits, for at most two minutes, with
// who in the message and show(last) as what it saw.
func waitFor[T any](r *Rig, who, what string, fetch func() T, cond func(T) bool, show func(T) any) T {
	r.t.Helper()
	var last T
	wait.Eventually(r.t, 2*time.Minute, who+": "+what, func() (any, bool) {
		last = fetch()
		return show(last), cond(last)
	})
	return last
}
