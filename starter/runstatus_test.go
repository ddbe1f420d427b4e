package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/runview"
)

// fakeRuns answers `run status` as a run workflow would: each query gets
// the next of its views (the last one again once they run out).
type fakeRuns struct {
	views []runapi.View
	// errs makes the query of that number (from 0) fail instead.
	errs map[int]error
	// closedFrom: the workflow has closed from that describe on (from 1;
	// 0 never), ending as how.
	closedFrom int
	how        string
	// missing: there is no such workflow.
	missing bool
	// paged: the view query answers a page as it is asked for one, as
	// the run workflow does.
	paged bool

	queries   []string
	describes int
}

func (f *fakeRuns) query(_ context.Context, slug, name string, out any, args ...any) error {
	n := len(f.queries)
	f.queries = append(f.queries, name)
	if f.missing {
		return runError(slug, "query "+name, serviceerror.NewNotFound("workflow not found for ID: "+runapi.WorkflowID(slug)))
	}
	if err := f.errs[n]; err != nil {
		return err
	}
	v := f.views[min(n, len(f.views)-1)]
	var answer any = v
	if name == runapi.QueryStatus {
		answer = v.Status
	}
	if p, ok := pageOf(args); ok && f.paged && name == runapi.QueryView {
		answer = pageOfView(v, p)
	}
	data, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func (f *fakeRuns) closed(_ context.Context, slug string) (bool, string, error) {
	f.describes++
	if f.missing {
		return false, "", runError(slug, "describe", serviceerror.NewNotFound("workflow not found"))
	}
	if f.closedFrom > 0 && f.describes >= f.closedFrom {
		return true, f.how, nil
	}
	return false, "", nil
}

func pageOf(args []any) (runapi.ViewPage, bool) {
	if len(args) != 1 {
		return runapi.ViewPage{}, false
	}
	p, ok := args[0].(runapi.ViewPage)
	return p, ok && p.Max > 0
}

// pageOfView is the page of a whole view the run workflow answers.
func pageOfView(v runapi.View, p runapi.ViewPage) runapi.View {
	page := v
	page.TaskCount, page.From = len(v.Tasks), p.From
	page.Tasks = v.Tasks[p.From:min(p.From+p.Max, len(v.Tasks))]
	page.Status.Tasks = map[string]*runstatus.Task{}
	for _, t := range page.Tasks {
		page.Status.Tasks[t.ID] = v.Status.Tasks[t.ID]
	}
	return page
}

var runT0 = time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)

// runViews are the states of a run of two tasks, b after a, reached
// through the reducer: ready, a running, b running, and ended (b done:
// complete; b failed: partial).
func runViews(t *testing.T, bFails bool) (ready, first, second, ended runapi.View) {
	t.Helper()
	r, err := runplan.Parse([]byte(`{"title":"Two steps","slug":"two","concurrency":1,
		"tasks":[{"id":"a","title":"First"},{"id":"b","title":"Second","depends":["a"]}]}`))
	require.NoError(t, err)
	s := runstatus.New(r, runT0)
	view := func() runapi.View {
		v := runapi.View{Slug: r.Slug, Title: r.Title, Concurrency: r.Concurrency, Status: s.Clone(), UpdatedAt: runT0}
		for _, task := range r.Tasks {
			v.Tasks = append(v.Tasks, runapi.TaskView{ID: task.ID, Title: task.Title, Depends: task.Depends,
				WorkflowID: runapi.TaskWorkflowID(task.ID)})
			if s.Tasks[task.ID].Status == runstatus.TaskRunning {
				v.Running++
			}
		}
		return v
	}
	ready = view()
	require.NoError(t, s.Start(runT0))
	require.NoError(t, s.TaskStarted("a", "", runT0))
	first = view()
	require.NoError(t, s.TaskEnded("a", runstatus.Done, 1, runT0.Add(time.Minute)))
	require.NoError(t, s.TaskStarted("b", "", runT0.Add(time.Minute)))
	second = view()
	outcome := runstatus.Done
	if bFails {
		outcome = runstatus.Failed("Phase test failed")
	}
	require.NoError(t, s.TaskEnded("b", outcome, 1, runT0.Add(3*time.Minute)))
	require.NoError(t, s.Complete(runT0.Add(3*time.Minute)))
	ended = view()
	return ready, first, second, ended
}

func testRunOptions(o runStatusOptions) runStatusOptions {
	o.Now = func() time.Time { return runT0.Add(90 * time.Second) }
	o.Location = time.UTC
	o.Poll = time.Millisecond
	return o
}

func drawn(v runapi.View, color bool) string {
	return runview.Render(v, runview.Options{Now: runT0.Add(90 * time.Second), Location: time.UTC, Color: color})
}

func TestRunStatusPrintsTheView(t *testing.T) {
	_, first, _, _ := runViews(t, false)
	runs := &fakeRuns{views: []runapi.View{first}}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{})))
	require.Equal(t, drawn(first, false), out.String())
	require.Equal(t, []string{runapi.QueryView}, runs.queries)
	require.Zero(t, runs.describes, "without -follow the workflow's state does not matter")
}

// -json prints the status.json document as the workflow holds it, and
// nothing else.
func TestRunStatusJSONIsTheDocument(t *testing.T) {
	_, _, second, _ := runViews(t, false)
	runs := &fakeRuns{views: []runapi.View{second}}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{JSON: true})))
	require.Equal(t, []string{runapi.QueryView}, runs.queries)

	want, err := json.Marshal(second.Status)
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, out.Bytes()))
	require.Equal(t, string(want), compact.String())
	require.True(t, strings.HasPrefix(out.String(), "{\n  \"prd_slug\": \"two\",\n"), "indented:\n%s", out.String())
	require.True(t, strings.HasSuffix(out.String(), "}\n"))
}

// A run too large for one answer is asked for a page at a time, and shows
// (or prints, with -json) exactly what one answer of it would.
func TestRunStatusOfALargeRunIsAskedForByPages(t *testing.T) {
	const n = 2*runapi.ViewPageSize + 500
	var tasks []string
	for i := range n {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(`,"depends":["t%05d"]`, i-1)
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"t%05d","title":"Task %d"%s}`, i, i, dep))
	}
	r, err := runplan.Parse([]byte(`{"title":"Big","slug":"big","concurrency":3,"tasks":[` + strings.Join(tasks, ",") + `]}`))
	require.NoError(t, err)
	s := runstatus.New(r, runT0)
	require.NoError(t, s.Start(runT0))
	for i := range 1500 {
		id := fmt.Sprintf("t%05d", i)
		require.NoError(t, s.TaskStarted(id, "", runT0))
		require.NoError(t, s.TaskEnded(id, runstatus.Done, 1, runT0.Add(time.Second)))
	}
	require.NoError(t, s.TaskStarted("t01500", "", runT0))
	whole := runapi.View{Slug: r.Slug, Title: r.Title, Concurrency: r.Concurrency, Status: s.Clone(), UpdatedAt: runT0, Running: 1}
	for _, task := range r.Tasks {
		whole.Tasks = append(whole.Tasks, runapi.TaskView{ID: task.ID, Title: task.Title, Depends: task.Depends,
			WorkflowID: runapi.TaskWorkflowID(task.ID), Attempt: 1})
	}
	oneAnswer := whole
	oneAnswer.TaskCount = n

	runs := &fakeRuns{views: []runapi.View{whole}, paged: true}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "big", &out, testRunOptions(runStatusOptions{})))
	require.Equal(t, drawn(oneAnswer, false), out.String())
	require.Equal(t, []string{runapi.QueryView, runapi.QueryView, runapi.QueryView}, runs.queries)
	require.Contains(t, out.String(), "1500/2500 done")

	runs = &fakeRuns{views: []runapi.View{whole}, paged: true}
	out.Reset()
	require.NoError(t, runStatus(context.Background(), runs, "big", &out, testRunOptions(runStatusOptions{JSON: true})))
	want, err := json.Marshal(whole.Status)
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, out.Bytes()))
	require.Equal(t, string(want), compact.String())
	require.Len(t, runs.queries, 3)
}

func TestRunStatusNamesAMissingRun(t *testing.T) {
	for _, o := range []runStatusOptions{{}, {JSON: true}, {Follow: true}} {
		var out bytes.Buffer
		err := runStatus(context.Background(), &fakeRuns{missing: true}, "nope", &out, testRunOptions(o))
		require.ErrorIs(t, err, errNoRun, "%+v", o)
		require.EqualError(t, err, "run nope: no such run: no workflow karvi-run-nope", "%+v", o)
		require.Empty(t, out.String())
	}
}

// Without a terminal, -follow prints each new state of the run below the
// last, not the same one again, and stops when the run ends.
func TestRunStatusFollowPrintsEachChangeUntilTheRunEnds(t *testing.T) {
	for _, bFails := range []bool{false, true} {
		ready, first, second, ended := runViews(t, bFails)
		restamped := first
		restamped.UpdatedAt = runT0.Add(time.Minute) // a new view, the same run
		runs := &fakeRuns{views: []runapi.View{ready, first, first, restamped, second, ended}}
		var out bytes.Buffer
		require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true})),
			"a run that ended %s is not a failure of the command", ended.Status.Status)
		sep := "\n--- 03:01:30\n\n"
		want := strings.Join([]string{drawn(ready, false), drawn(first, false), drawn(second, false), drawn(ended, false)}, sep)
		require.Equal(t, want, out.String())
		require.Len(t, runs.queries, 6, "stops at the first ended state")
	}
}

// On a terminal the view is redrawn in place at every poll, so the clock
// moves, in colour.
func TestRunStatusFollowOnATerminalRedraws(t *testing.T) {
	_, first, _, ended := runViews(t, false)
	runs := &fakeRuns{views: []runapi.View{first, first, ended}}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true, Terminal: true})))
	require.Equal(t, clearScreen+drawn(first, true)+clearScreen+drawn(first, true)+clearScreen+drawn(ended, true), out.String())
	require.Contains(t, out.String(), "\x1b[33mrunning\x1b[0m")
}

func TestRunStatusFollowJSONPrintsEachNewDocument(t *testing.T) {
	ready, first, _, ended := runViews(t, true)
	runs := &fakeRuns{views: []runapi.View{ready, ready, first, ended}}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true, JSON: true, Terminal: true})))
	dec := json.NewDecoder(&out)
	var states []runstatus.RunState
	for dec.More() {
		var doc runstatus.Status
		require.NoError(t, dec.Decode(&doc))
		states = append(states, doc.Status)
	}
	require.Equal(t, []runstatus.RunState{runstatus.RunReady, runstatus.RunActive, runstatus.RunPartial}, states)
	require.NotContains(t, out.String(), "\x1b", "no screen control in a JSON stream")
}

// A workflow that closes without ending the run (terminated, say) ends
// -follow with an error, after its last state.
func TestRunStatusFollowFailsWhenTheWorkflowClosesFirst(t *testing.T) {
	_, first, second, _ := runViews(t, false)
	runs := &fakeRuns{views: []runapi.View{first, second}, closedFrom: 2, how: "terminated"}
	var out bytes.Buffer
	err := runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true}))
	require.EqualError(t, err, "run two: its workflow karvi-run-two is terminated, but the run has not ended")
	require.Equal(t, drawn(first, false)+"\n--- 03:01:30\n\n"+drawn(second, false), out.String())
}

// A query that fails while the workflow runs (between runs of a
// continue-as-new, no worker yet) is asked again; once the workflow has
// closed it is the answer.
func TestRunStatusFollowRidesOutAFailedQuery(t *testing.T) {
	_, first, _, ended := runViews(t, false)
	busy := errors.New("workflow task in progress")
	runs := &fakeRuns{views: []runapi.View{first, first, ended}, errs: map[int]error{1: busy}}
	var out bytes.Buffer
	require.NoError(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true})))
	require.Equal(t, drawn(first, false)+"\n--- 03:01:30\n\n"+drawn(ended, false), out.String())

	runs = &fakeRuns{views: []runapi.View{first}, errs: map[int]error{0: busy}, closedFrom: 1, how: "completed"}
	out.Reset()
	require.ErrorIs(t, runStatus(context.Background(), runs, "two", &out, testRunOptions(runStatusOptions{Follow: true})), busy)
	require.Empty(t, out.String())
}

func TestRunStatusFollowStopsWithItsContext(t *testing.T) {
	_, first, _, _ := runViews(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := runStatus(ctx, &fakeRuns{views: []runapi.View{first}}, "two", &bytes.Buffer{}, testRunOptions(runStatusOptions{Follow: true}))
	require.ErrorIs(t, err, context.Canceled)
}

func TestRunStatusCommandLine(t *testing.T) {
	for _, c := range []struct {
		args         []string
		follow, json bool
		address      string
	}{
		{args: []string{"run", "status", "user-profiles"}},
		{args: []string{"run", "status", "-json", "user-profiles"}, json: true},
		{args: []string{"run", "status", "user-profiles", "-follow"}, follow: true},
		{args: []string{"-address", "a:1", "run", "status", "-follow", "-json", "user-profiles"}, follow: true, json: true, address: "a:1"},
		{args: []string{"run", "status", "user-profiles", "-address", "a:1", "-json"}, json: true, address: "a:1"},
	} {
		inv, err := parseArgs(c.args)
		require.NoError(t, err, "%v", c.args)
		require.Equal(t, "run status", inv.cmd.name)
		require.Equal(t, "user-profiles", inv.arg)
		require.Equal(t, c.follow, inv.opts.(*runStatusOpts).follow, "%v", c.args)
		require.Equal(t, c.json, inv.opts.(*runStatusOpts).json, "%v", c.args)
		require.Equal(t, c.address, inv.conn.Address, "%v", c.args)
	}

	code, out, _ := cliRun(t, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "starter run status [-follow] [-json] <slug>")
	code, out, _ = cliRun(t, "run", "status", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage: starter run status [flags] <slug>")
	require.Contains(t, out, "redraw as the run changes until it ends")
	require.Contains(t, out, "print the run's status.json document instead of the view")

	for args, want := range map[string]string{
		"run status":             "run status takes exactly one argument, <slug>; got 0",
		"run status a b":         "run status takes exactly one argument, <slug>; got 2",
		"run status -watch a":    "flag provided but not defined: -watch",
		"run status -reason x a": "flag provided but not defined: -reason",
	} {
		code, out, errOut := cliRun(t, strings.Fields(args)...)
		require.Equal(t, 2, code, args)
		require.Empty(t, out, args)
		require.Contains(t, errOut, want, args)
		require.Contains(t, errOut, "Usage: starter run status", args)
	}

	// It reaches Temporal the way every command does: a bad setting stops
	// it before any dial.
	t.Setenv("TEMPORAL_TLS", "maybe")
	code, _, errOut := cliRun(t, "run", "status", "-address", "127.0.0.1:1", "user-profiles")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `TEMPORAL_TLS="maybe"`)
}

func TestRunStatusOptionsFor(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	o := runStatusOptionsFor(f, runStatusOpts{follow: true, json: true})
	require.True(t, o.Follow)
	require.True(t, o.JSON)
	require.False(t, o.Terminal, "a file is not a terminal")
	require.Equal(t, runPoll, o.Poll)
	require.NotNil(t, o.Now)
}
