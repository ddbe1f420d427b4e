package runflow

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"karvi-edda-temporal/activities/runact"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// bigRunFile is a run file of n tasks shaped as the run benchmark's: levels
// of width tasks, each waiting for two of the level before.
func bigRunFile(n, width int) []byte {
	var tasks []string
	for i := range n {
		deps := ""
		if lvl := i / width; lvl > 0 {
			prev := (lvl - 1) * width
			deps = fmt.Sprintf(`,"depends":["big-t%05d","big-t%05d"]`, prev+i%width, prev+(i+1)%width)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"big-t%05d","title":"Task %d","description":"[sim checks=pass delay=100ms cost=0.01]","skill":"single"%s}`, i, i, deps))
	}
	return fmt.Appendf(nil, `{"slug":"big-run","title":"Big run","concurrency":1000,"tasks":[%s]}`, strings.Join(tasks, ","))
}

// TestHandoverOfAHugeRunStaysFarBelowTheBlobLimit: a run of 10,000 tasks,
// every one of them done, hands over to its next run an input far below
// Temporal's 2 MB payload limit, and the next run reads it back whole.
func TestHandoverOfAHugeRunStaysFarBelowTheBlobLimit(t *testing.T) {
	data := bigRunFile(10000, 500)
	run, err := runplan.Parse(data)
	require.NoError(t, err)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	st := runState{Doc: runstatus.New(run, at), Tasks: map[string]*runTask{}}
	require.NoError(t, st.Doc.Start(at))
	for i, rt := range run.Tasks {
		require.NoError(t, st.Doc.TaskStarted(rt.ID, st.Doc.Tasks[rt.ID].Model, at.Add(time.Duration(i)*time.Millisecond)))
		require.NoError(t, st.Doc.Looped(rt.ID))
		require.NoError(t, st.Doc.TaskEnded(rt.ID, runstatus.Done, 0, at.Add(time.Duration(i+100)*time.Millisecond)))
		st.Tasks[rt.ID] = &runTask{Attempt: 1, CostUSD: 0.01, Summary: "Done: " + strings.Repeat("s", 200)}
	}
	r := &runFlow{in: runapi.RunInput{Run: data}, run: run, st: st}
	next, err := r.handover()
	require.NoError(t, err)
	payload, err := json.Marshal(next)
	require.NoError(t, err)
	t.Logf("run file %d bytes, handover %d bytes", len(data), len(payload))
	require.Less(t, len(payload), 1<<20, "a 10,000-task run's continue-as-new input must stay far below Temporal's 2 MB blob limit")

	small := &runFlow{st: runState{Doc: runstatus.New(run, at)}}
	small.st.Doc.Tasks = map[string]*runstatus.Task{"big-t00000": st.Doc.Tasks["big-t00000"]}
	require.Len(t, small.result().Tasks, 1, "a run's result is its whole document")
	r.st.Doc.Summary = &runstatus.Summary{}
	for i := range 3 {
		// A run this large with longer entries, as real ones have.
		for _, rt := range run.Tasks {
			st.Doc.Tasks[rt.ID].Error = strings.Repeat("e", 60*i)
		}
		res := r.result()
		data, err := json.Marshal(res)
		require.NoError(t, err)
		require.LessOrEqual(t, len(data), resultMaxBytes, "the result stays below the blob limit")
		require.NotNil(t, res.Summary)
		require.Equal(t, runstatus.RunActive, res.Status)
		if i == 2 {
			require.Nil(t, res.Tasks, "past the bound the task entries are left out")
		}
	}
	require.Len(t, r.st.Doc.Tasks, 10000, "the run keeps its document whole")

	got, err := resumeInput(next)
	require.NoError(t, err)
	require.Equal(t, run.Slug, got.run.Slug)
	require.Len(t, got.st.Doc.Tasks, 10000)
	require.Equal(t, runstatus.TaskDone, got.st.Doc.Tasks["big-t09999"].Status)
	require.Equal(t, 1, got.st.Tasks["big-t09999"].Attempt)
}

// TestStatusWriteShipsOnlyWhatChanged: after the first write of the whole
// document, each status.json write of a 40-task chain ships only the task
// entries that changed (a task ending and the next starting), and the file
// comes out as the whole document has always been written.
func TestStatusWriteShipsOnlyWhatChanged(t *testing.T) {
	f := &fakeTasks{}
	env, root := runEnv(t, f)
	var mu sync.Mutex
	var reqs []runact.RunStatusRequest
	env.SetOnLocalActivityStartedListener(func(_ *activity.Info, _ context.Context, args []any) {
		if req, ok := args[0].(runact.RunStatusRequest); ok {
			mu.Lock()
			reqs = append(reqs, req)
			mu.Unlock()
		}
	})
	env.ExecuteWorkflow(runapi.RunWorkflowName, runapi.RunInput{Run: json.RawMessage(bigRunFile(40, 1))})
	doc := runResult(t, env)
	require.Equal(t, runstatus.RunComplete, doc.Status)

	require.Greater(t, len(reqs), 40)
	require.NotEmpty(t, reqs[0].Document, "the first write ships the whole document")
	require.False(t, reqs[0].Patch)
	for i, req := range reqs[1:] {
		require.True(t, req.Patch, "write %d should be a patch", i+1)
		require.Empty(t, req.Document, "write %d shipped the whole document", i+1)
		require.LessOrEqual(t, len(req.Tasks), 2, "write %d shipped %d task entries for one change", i+1, len(req.Tasks))
		require.Equal(t, i+2, req.Seq)
	}
	require.True(t, reqs[len(reqs)-1].Final)

	whole, err := json.Marshal(doc)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(whole, &v))
	want, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got, err := os.ReadFile(runact.RunStatusPath(root, "big-run"))
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", string(got))
}

// TestSameTaskSeesEveryField: a change to any field of a task's entry
// makes it ship.
func TestSameTaskSeesEveryField(t *testing.T) {
	typ := reflect.TypeFor[runstatus.Task]()
	for i := range typ.NumField() {
		var b runstatus.Task
		fv := reflect.ValueOf(&b).Elem().Field(i)
		switch fv.Kind() {
		case reflect.String:
			fv.SetString("x")
		case reflect.Int:
			fv.SetInt(1)
		case reflect.Slice:
			fv.Set(reflect.ValueOf([]string{"x"}))
		case reflect.Struct:
			fv.Set(reflect.ValueOf(time.Unix(1, 0)))
		default:
			t.Fatalf("field %s: kind %s not covered", typ.Field(i).Name, fv.Kind())
		}
		require.False(t, sameTask(runstatus.Task{}, b), "a change of %s goes unseen", typ.Field(i).Name)
	}
	require.True(t, sameTask(runstatus.Task{BlockedBy: []string{"a"}}, runstatus.Task{BlockedBy: []string{"a"}}))
}
