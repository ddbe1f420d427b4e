package runflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
)

// The view query answers a page of the tasks when asked for one, and the
// pages put together are the whole view: a run too large for one answer
// (the server's 2 MB limit) is still shown whole.
func TestViewAnswersPagesThatMakeTheWhole(t *testing.T) {
	env, _ := runEnv(t, &fakeTasks{})
	var whole runapi.View
	var pages []runapi.View
	var fetched runapi.View
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(runapi.QueryView)
		require.NoError(t, err)
		require.NoError(t, v.Get(&whole))
		ask := func(p runapi.ViewPage) (runapi.View, error) {
			v, err := env.QueryWorkflow(runapi.QueryView, p)
			if err != nil {
				return runapi.View{}, err
			}
			var page runapi.View
			err = v.Get(&page)
			return page, err
		}
		for _, p := range []runapi.ViewPage{{Max: 2}, {From: 2, Max: 2}, {From: 4, Max: 2}, {From: 9, Max: 2}} {
			page, err := ask(p)
			require.NoError(t, err)
			pages = append(pages, page)
		}
		fetched, err = runapi.FetchView(ask)
		require.NoError(t, err)
	}, 90*time.Second)
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(diamondRun)})
	runResult(t, env)

	require.Equal(t, 5, whole.TaskCount)
	require.Len(t, whole.Tasks, 5)
	require.Len(t, whole.Status.Tasks, 5)
	ids := func(v runapi.View) (order []string, keys []string) {
		for _, task := range v.Tasks {
			order = append(order, task.ID)
		}
		for id := range v.Status.Tasks {
			keys = append(keys, id)
		}
		return order, keys
	}
	for i, want := range [][]string{{"a", "b"}, {"c", "d"}, {"e"}, nil} {
		order, keys := ids(pages[i])
		require.Equal(t, want, order, "page %d", i)
		require.ElementsMatch(t, want, keys, "page %d: its document holds its tasks only", i)
		require.Equal(t, 5, pages[i].TaskCount)
		require.Equal(t, whole.Status.Status, pages[i].Status.Status)
	}
	require.Equal(t, whole.Status.Tasks["c"], pages[1].Status.Tasks["c"], "a page is the run as it stands")
	require.Equal(t, whole, fetched)
}
