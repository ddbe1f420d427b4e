//go:build realserver

package testrig

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stretchr/testify/require"
)

// query asks a workflow's query and decodes its answer.
func query[T any](r *Rig, workflowID, name string) T {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := r.Client.QueryWorkflow(ctx, workflowID, "", name)
	require.NoError(r.t, err)
	var out T
	require.NoError(r.t, v.Get(&out))
	return out
}

// waitFor fetches until cond holds, for at most two minutes; on timeout
// the test fails naming who and what, with show(last) as JSON.
func waitFor[T any](r *Rig, who, what string, fetch func() T, cond func(T) bool, show func(T) any) T {
	r.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v := fetch()
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			data, _ := json.MarshalIndent(show(v), "", "  ")
			r.t.Fatalf("%s: timed out waiting for %s; last seen:\n%s", who, what, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
