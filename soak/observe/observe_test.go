package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/testkit/karvifake"
)

const (
	plan1 = "karvi-a-r1-0badcafe"
	plan2 = "karvi-a-r2-0badcafe"
)

var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(data))
}

// startGroup starts a sleeping process leading its own process group, with
// env added, and stops it when the test ends.
func startGroup(t *testing.T, env ...string) proc.Handle {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	ps, err := proc.Processes()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p proc.Process) bool { return p.PID == pid })
	if i < 0 {
		t.Fatalf("pid %d not found", pid)
	}
	return proc.Handle{PID: pid, PGID: pid, StartTime: ps[i].StartTime, Token: strings.TrimPrefix(strings.Join(env, ""), proc.TokenEnv+"=")}
}

// goneHandle is the record of a run whose process ended long ago.
func goneHandle() proc.Handle {
	return proc.Handle{PID: 1 << 22, PGID: 1 << 22, StartTime: 1, Token: "gone"}
}

// fakeRoot is a work root as a host leaves it: task a's attempt 1 ran,
// paused and resumed (a run directory each), its attempt 2 is the live one.
func fakeRoot(t *testing.T) (root string, live proc.Handle) {
	t.Helper()
	root = t.TempDir()
	live = startGroup(t, proc.TokenEnv+"=tok-live")
	writeJSON(t, filepath.Join(root, "runs", "a", plan1, "handle.json"), goneHandle())
	writeJSON(t, filepath.Join(root, "runs", "a", plan1+"-resume-1", "handle.json"), goneHandle())
	writeJSON(t, filepath.Join(root, "runs", "a", plan2, "handle.json"), live)
	// A run directory whose conductor is being started: no record yet.
	if err := os.MkdirAll(filepath.Join(root, "runs", "b", "karvi-b-r1-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, "tasks", "a", ".edda", "conductor", plan1)
	write(t, filepath.Join(state, "events.jsonl"), strings.Join([]string{
		`{"seq":0,"ts":"2026-03-10T14:00:01Z","type":"PlanStart","plan_name":"x","phase_count":2}`,
		`{"seq":1,"ts":"2026-03-10T14:00:02Z","type":"phase_start","phase_id":"implement","attempt":1}`,
		`not json`,
		`{"seq":2,"ts":"2026-03-10T14:00:05Z","type":"phase_passed","phase_id":"implement","attempt":1,"cost_usd":0.42}`,
		`{"seq":0,"ts":"2026-03-10T14:01:00Z","type":"phase_start","phase_id":"test","attempt":1}`,
		`{"seq":1,"ts":"2026-03-10T14:01:0`, // torn: the conductor was writing it
	}, "\n"))
	write(t, filepath.Join(state, "state.json"), `{"plan_status":"running","total_cost_usd":0.61,"phases":[]}`)
	write(t, filepath.Join(root, "prds", "r", "status.json"),
		`{"prd_slug":"r","status":"active","tasks":{"a":{"status":"running"},"c":{"status":"failed","error":"boom"}}}`)
	return root, live
}

func TestReadPlans(t *testing.T) {
	root, _ := fakeRoot(t)
	plans, err := ReadPlans([]Root{{Host: "h1", Dir: t.TempDir()}, {Host: "h2", Dir: root}}, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Name != plan1 || plans[1].Name != plan2 {
		t.Fatalf("plans: %+v", plans)
	}
	p := plans[0]
	if !slices.Equal(p.RunDirs, []string{plan1, plan1 + "-resume-1"}) {
		t.Errorf("run dirs: %v", p.RunDirs)
	}
	var types []string
	for _, e := range p.Events {
		types = append(types, fmt.Sprintf("%d:%s:%s:%s", e.Line, e.Type, e.Phase, e.Time))
	}
	want := []string{
		"1:plan_start::2026-03-10T14:00:01Z", "2:phase_start:implement:2026-03-10T14:00:02Z",
		"4:phase_passed:implement:2026-03-10T14:00:05Z", "5:phase_start:test:2026-03-10T14:01:00Z",
	}
	if !slices.Equal(types, want) {
		t.Errorf("events:\n got %v\nwant %v", types, want)
	}
	if p.Malformed != 1 {
		t.Errorf("malformed: %d, want 1 (the torn last line is not counted)", p.Malformed)
	}
	if p.State == nil || p.State.TotalCostUSD != 0.61 || p.State.Status != "running" {
		t.Errorf("state: %+v", p.State)
	}
	if plans[1].State != nil || len(plans[1].Events) != 0 {
		t.Errorf("attempt 2 has no conductor files yet: %+v", plans[1])
	}
	// The job view's working directory wins over the default one.
	cwd := t.TempDir()
	write(t, filepath.Join(cwd, ".edda", "conductor", plan2, "state.json"), `{"total_cost_usd":1.5}`)
	plans, err = ReadPlans([]Root{{Dir: root}}, "a", map[string]string{plan2: cwd})
	if err != nil || plans[1].State == nil || plans[1].State.TotalCostUSD != 1.5 {
		t.Fatalf("with a cwd: %+v, %v", plans, err)
	}
}

func TestBriefsAndBoards(t *testing.T) {
	brief := `{"plan":{"name":"` + plan2 + `"},"phases":{"implement":{"status":"passed"},"old":null,"test":{"status":null}},
		"cost":{"total_usd":1.2,"by_phase":{"implement":1.2,"old":null}},
		"log":[{"time":"t1","agent":"conductor","action":"plan_start","detail":"2 phases"}]}`
	b, err := ParseBrief([]byte(brief))
	if err != nil {
		t.Fatal(err)
	}
	if b.PlanName != plan2 || len(b.Phases) != 1 || b.Phases["implement"] != "passed" || *b.TotalUSD != 1.2 ||
		len(b.ByPhase) != 1 || len(b.Log) != 1 || b.Log[0].Action != "plan_start" {
		t.Fatalf("brief: %+v", b)
	}
	if b, err := ParseBrief(nil); b != nil || err != nil {
		t.Fatalf("no brief: %+v %v", b, err)
	}
	if _, err := ParseBrief([]byte(`{"log":"nope"}`)); err == nil {
		t.Fatal("a malformed brief read without an error")
	}

	dir := t.TempDir()
	write(t, filepath.Join(dir, "a", "brief.json"), brief)
	write(t, filepath.Join(dir, "a", "status.json"), `{"status":"blocked","blocker":{"reason":"boom","askedAt":"x"},
		"history":[{"at":"2026-03-10T14:00:01Z","status":"dispatched"},{"at":"2026-03-10T14:00:09Z","from":"in_progress","status":"blocked"}]}`)
	bt, br, err := FileBoard(dir).Task("a")
	if err != nil {
		t.Fatal(err)
	}
	if bt.Status != "blocked" || bt.Blocker != "boom" || len(bt.History) != 2 || !bt.History[1].At.Equal(t0.Add(9*time.Second)) || br.PlanName != plan2 {
		t.Fatalf("file board: %+v %+v", bt, br)
	}
	if bt, br, err := FileBoard(dir).Task("none"); bt != nil || br != nil || err != nil {
		t.Fatalf("a task the sink never saw: %+v %+v %v", bt, br, err)
	}

	k := karvifake.New(karvifake.Options{})
	if err := k.AddTask(karvifake.Task{ID: "a", Status: "completed", BriefPath: true, Brief: json.RawMessage(brief),
		History: []json.RawMessage{json.RawMessage(`{"ts":"2026-03-10T14:00:09.000Z","status":"completed","from":"in_progress"}`)}}); err != nil {
		t.Fatal(err)
	}
	bt, br, err = FakeBoard(k).Task("a")
	if err != nil {
		t.Fatal(err)
	}
	if bt.Status != "completed" || len(bt.History) != 1 || bt.History[0].Status != "completed" || br == nil || br.PlanName != plan2 {
		t.Fatalf("karvi fake: %+v %+v", bt, br)
	}
}

func TestReadRunStatus(t *testing.T) {
	root, _ := fakeRoot(t)
	st, err := ReadRunStatus([]Root{{Dir: t.TempDir()}, {Dir: root}}, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st["a"].Status != "running" || st["c"].Error != "boom" {
		t.Fatalf("run status: %+v", st)
	}
	if st, err := ReadRunStatus([]Root{{Dir: root}}, "none"); st != nil || err != nil {
		t.Fatalf("a run without status.json: %v %v", st, err)
	}
}

func TestReadFenceStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker.log")
	write(t, path, strings.Join([]string{
		`time=2026-03-10T14:00:31.5Z level=INFO msg="worker started" host=h1`,
		`time=2026-03-10T14:01:31.25Z level=INFO msg="fence: stopped a conductor its workflow gave up" task=a plan=` + plan1 + `-resume-1 why="the task's workflow is at attempt 1 (plan ` + plan1 + `)"`,
		`time=2026-03-10T14:01:32Z level=INFO msg="fence: keeping a live conductor" task=b plan=x why="the task's current attempt on this host"`,
		`garbage line with fence: stopped in it`,
	}, "\n"))
	stops, err := ReadFenceStops(path, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if len(stops) != 1 {
		t.Fatalf("stops: %+v", stops)
	}
	s := stops[0]
	if !s.At.Equal(t0.Add(91250*time.Millisecond)) || s.Host != "h1" || s.Task != "a" || s.Plan != plan1+"-resume-1" ||
		s.Why != "the task's workflow is at attempt 1 (plan "+plan1+")" {
		t.Fatalf("stop: %+v", s)
	}
	if stops, err := ReadFenceStops(filepath.Join(t.TempDir(), "none.log"), "h1"); stops != nil || err != nil {
		t.Fatalf("no log: %v %v", stops, err)
	}
}

func TestWebhooksAndJournalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	hooks := filepath.Join(dir, "webhooks.jsonl")
	body := []byte(`{"id":"karvi-task-a-paused-1","version":1,"kind":"paused","time":"2026-03-10T14:00:00Z","task_id":"a"}`)
	retry, _ := WebhookLine(t0.Add(time.Second), "karvi-task-a-paused-1", body)
	first, _ := WebhookLine(t0, "karvi-task-a-paused-1", body)
	later, _ := WebhookLine(t0.Add(time.Minute), "karvi-task-a-paused-1",
		[]byte(`{"id":"karvi-task-a-paused-1","version":1,"kind":"paused","time":"2026-03-10T14:01:00Z","task_id":"a","reason":"usage limit in phase docs"}`))
	write(t, hooks, string(first)+"\n"+string(retry)+"\n"+string(later)+"\n"+`{"id":"x","di`)
	ws, err := ReadWebhooks(hooks)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 3 || ws[0].Kind != "paused" || ws[0].Task != "a" || ws[0].Time != "2026-03-10T14:00:00Z" ||
		ws[0].Digest != ws[1].Digest || ws[0].Digest == ws[2].Digest {
		t.Fatalf("webhooks: %+v", ws)
	}
	if vs := soak.CheckWebhookIDsUnique(&soak.Observed{Webhooks: ws}, soak.Config{}); len(vs) != 1 {
		t.Fatalf("the reused id is not caught: %v", vs)
	}

	jpath := filepath.Join(dir, "journal.jsonl")
	j, err := OpenJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	recs := []soak.Record{
		{At: t0, Kind: soak.RecTaskStart, Task: "a", Attempt: 1, Details: map[string]string{"budgetUsd": "1.00", "budgetAction": "block"}},
		{Kind: soak.RecWorkerKill, Details: map[string]string{"host": "h1", "pid": "42"}},
	}
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(recs[0]); err == nil {
		t.Fatal("append to a closed journal: no error")
	}
	f, _ := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"at":"2026-03-10T14:00:0`)
	f.Close()
	got, err := ReadJournal(jpath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Detail("budgetAction") != "block" || got[1].At.IsZero() || got[1].Kind != soak.RecWorkerKill {
		t.Fatalf("journal: %+v", got)
	}
	write(t, jpath, "{bad}\n"+`{"kind":"note"}`+"\n")
	if _, err := ReadJournal(jpath); err == nil || !strings.Contains(err.Error(), "journal.jsonl:1") {
		t.Fatalf("a malformed line inside the journal: %v", err)
	}
}

// fakeWorkflows answers from a table, counting its queries. The sampler
// asks it from several goroutines.
type fakeWorkflows struct {
	mu     sync.Mutex
	status map[string]soak.TaskSample
	budget map[string]*soak.Budget
	final  map[string]*soak.WorkflowObs
	jobs   map[string]*soak.JobObs
	asked  []string
	costs  []string
}

func (f *fakeWorkflows) Status(_ context.Context, task string) (soak.TaskSample, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, task)
	s, ok := f.status[task]
	if s.Task == "boom" {
		return s, true, fmt.Errorf("query failed")
	}
	return s, ok, nil
}

func (f *fakeWorkflows) Cost(_ context.Context, task string) (float64, *soak.Budget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.costs = append(f.costs, task)
	return 0.5, f.budget[task], nil
}

func (f *fakeWorkflows) Final(_ context.Context, task string) (*soak.WorkflowObs, *soak.JobObs, map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.final[task], f.jobs[task], nil, nil
}

func TestSamplerTimeline(t *testing.T) {
	root, live := fakeRoot(t)
	now := t0
	wf := &fakeWorkflows{
		status: map[string]soak.TaskSample{
			"a": {Task: "a", Open: true, Stage: "running", Attempt: 2, PlanName: plan2},
			"b": {Task: "b", Open: false, Stage: "done", Attempt: 1, PlanName: "karvi-b-r1-1"},
		},
		budget: map[string]*soak.Budget{"a": {LimitUSD: 1, Action: "block"}},
	}
	s := NewSampler(SamplerConfig{Roots: []Root{{Host: "h1", Dir: root}}, Workflows: wf,
		QueriesPerTick: 1, TaskEvery: time.Second, Parallel: 1, KeepEvery: 5 * time.Second,
		Now: func() time.Time { return now }})
	s.Watch("c") // started, no workflow yet
	ctx := context.Background()
	for range 8 {
		s.Tick(ctx)
		now = now.Add(200 * time.Millisecond)
	}
	smp := s.Samples()
	if len(smp) == 0 {
		t.Fatal("no samples")
	}
	want := []soak.LiveConductor{{Host: "h1", Task: "a", Dir: plan2, PGID: live.PGID}}
	if !slices.Equal(smp[0].Conductors, want) {
		t.Fatalf("live conductors: %+v, want %+v", smp[0].Conductors, want)
	}
	// One query a tick, the least recently asked first, a task at most
	// once a second: a, b and c once each in the first three ticks, then
	// a again once its second passed; b ended and is asked no more, c has
	// no workflow and waits two seconds.
	if want := []string{"a", "b", "c", "a"}; !slices.Equal(wf.asked, want) {
		t.Fatalf("asked %v, want %v", wf.asked, want)
	}
	if want := []string{"a", "a"}; !slices.Equal(wf.costs, want) {
		t.Fatalf("cost asked of %v, want %v (b ended, c has no workflow)", wf.costs, want)
	}
	var seen []string
	for _, x := range smp {
		for _, ts := range x.Tasks {
			seen = append(seen, ts.Task)
			if ts.Task == "a" && (!ts.HasCost || ts.Budget == nil || ts.Budget.Action != "block") {
				t.Errorf("a's sample lacks its cost and budget: %+v", ts)
			}
		}
	}
	if want := []string{"a", "b", "a"}; !slices.Equal(seen, want) {
		t.Fatalf("statuses sampled %v, want %v", seen, want)
	}
	// Process samples that show nothing new are dropped until KeepEvery
	// passes: one of them, and one sample per tick that had an answer.
	if len(smp) != 4 {
		t.Errorf("kept %d samples of 8 ticks, want 4", len(smp))
	}
	st := s.Stats()
	if st.Ticks != 8 || st.Kept != 1 || st.Queries != 6 || st.QueryErrors != 0 || st.ScanErrors != 0 {
		t.Errorf("stats: %+v", st)
	}
	// A new run directory of an ended task opens it again.
	if err := os.MkdirAll(filepath.Join(root, "runs", "b", "karvi-b-r2-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Second)
	wf.asked = nil
	for range 3 {
		s.Tick(ctx)
	}
	if !slices.Contains(wf.asked, "b") {
		t.Fatalf("b not asked again after a new attempt appeared: %v", wf.asked)
	}
}

func TestSamplerRunsInTheBackground(t *testing.T) {
	root, _ := fakeRoot(t)
	s := NewSampler(SamplerConfig{Roots: []Root{{Dir: root}}, Every: 5 * time.Millisecond})
	s.Start(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Ticks < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.Stop()
	s.Stop()
	if n := s.Stats().Ticks; n < 3 {
		t.Fatalf("%d ticks", n)
	}
	if len(s.Samples()) == 0 || len(s.Samples()[0].Conductors) != 1 {
		t.Fatalf("samples: %+v", s.Samples())
	}
}

func TestLeftovers(t *testing.T) {
	root, live := fakeRoot(t)
	// An agent that left its conductor's group but carries its token.
	agent := startGroup(t, proc.TokenEnv+"=tok-live")
	worker := startGroup(t)
	left, err := Leftovers([]Root{{Host: "h1", Dir: root}}, []Started{{PID: worker.PID, What: "worker", Host: "h2"}, {PID: 1 << 22, What: "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range left {
		got = append(got, fmt.Sprintf("%d %s %s %s", p.PID, p.What, p.Host, p.Dir))
	}
	want := []string{
		fmt.Sprintf("%d conductor h1 %s", live.PID, plan2),
		fmt.Sprintf("%d agent h1 %s", agent.PID, plan2),
		fmt.Sprintf("%d worker h2 ", worker.PID),
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("leftovers:\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(left[0].Cmd, "sleep") {
		t.Errorf("command line: %q", left[0].Cmd)
	}
}

// TestCollectFeedsTheChecks reads a fake work root, file sink and journal
// through Collect and judges it: the brief that lost an event, the blocked
// run task that status.json calls running, and the task never ended are
// found; the rest passes.
func TestCollectFeedsTheChecks(t *testing.T) {
	root, _ := fakeRoot(t)
	dir := t.TempDir()
	sinkDir := filepath.Join(dir, "sink")
	log := func(entries ...string) string {
		var l []string
		for _, e := range entries {
			f := strings.Split(e, "|")
			l = append(l, fmt.Sprintf(`{"time":%q,"agent":"conductor","action":%q,"detail":%q}`, f[0], f[1], f[2]))
		}
		return "[" + strings.Join(l, ",") + "]"
	}
	// Attempt 1's brief is missing its phase_passed entry.
	write(t, filepath.Join(sinkDir, "a", "brief.json"), `{"plan":{"name":"`+plan1+`"},"phases":{"implement":{"status":"passed"},"test":{"status":"failed"}},
		"cost":{"total_usd":0.61,"by_phase":{"implement":0.42,"test":0.19}},"log":`+log(
		"2026-03-10T14:00:01Z|plan_start|2 phases", "2026-03-10T14:00:02Z|phase_start|implement",
		"2026-03-10T14:01:00Z|phase_start|test")+`}`)
	write(t, filepath.Join(sinkDir, "a", "status.json"), `{"status":"blocked","history":[{"at":"2026-03-10T14:00:01Z","status":"in_progress"},{"at":"2026-03-10T14:01:09Z","status":"blocked"}]}`)
	jpath := filepath.Join(dir, "journal.jsonl")
	j, _ := OpenJournal(jpath)
	_ = j.Append(soak.Record{At: t0, Kind: soak.RecRunStart, Run: "r"})
	_ = j.Append(soak.Record{At: t0, Kind: soak.RecTaskStart, Task: "d"})
	_ = j.Close()
	wf := &fakeWorkflows{
		final: map[string]*soak.WorkflowObs{
			"a": {Closed: true, CloseStatus: "completed", Closes: 1, Outcome: "blocked", TaskStatus: "blocked", Attempt: 1, PlanName: plan1,
				OutcomeError: "check failed: cmd `go test` exited 1"},
			"c": {Closed: true, CloseStatus: "completed", Closes: 1, Outcome: "blocked", TaskStatus: "blocked", Attempt: 1, PlanName: "karvi-c-r1-1"},
			"d": {Closed: false, Stage: "running", Attempt: 1, PlanName: "karvi-d-r1-1"},
		},
		jobs: map[string]*soak.JobObs{"a": {Attempts: []string{plan1}, Steps: []soak.JobStep{
			{Phase: "implement", Tries: 1, CostUSD: 0.42}, {Phase: "test", Tries: 1, CostUSD: 0.19}}}},
	}
	c := NewChecker(CheckerConfig{
		Sources:      Sources{Roots: []Root{{Host: "h1", Dir: root}}, Board: FileBoard(sinkDir), Workflows: wf, JournalPath: jpath},
		Sampler:      SamplerConfig{Every: time.Hour},
		ObservedPath: filepath.Join(dir, "observed.json"),
	})
	c.Start(context.Background())
	vs, err := c.Final(context.Background(), []TaskRef{{ID: "a", Run: "r"}}, []string{"r"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, string(v.Invariant)+" "+v.Task)
	}
	want := []string{
		"ends-once-and-agrees a", // status.json says running
		"ends-once-and-agrees b", // a run directory, no workflow
		"ends-once-and-agrees d", // still running
		"brief-log-matches-events a",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n got %v\nwant %v\n%v", got, want, vs)
	}
	for _, v := range vs {
		if v.Invariant == soak.InvBriefLogMatchesEvents && !strings.Contains(v.Evidence, "line 4 {2026-03-10T14:00:05Z phase_passed implement}") {
			t.Errorf("evidence does not point at the missing event: %s", v.Evidence)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "observed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o soak.Observed
	if err := json.Unmarshal(data, &o); err != nil || len(o.Tasks) != 4 || o.Task("a").RunStatus == nil || o.Task("c").RunStatus.Status != "failed" {
		t.Fatalf("saved observation: %v %+v", err, o.Tasks)
	}
	left, err := c.Leftovers(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Invariant != soak.InvNothingLeftRunning || !strings.Contains(left[0].Evidence, plan2) {
		t.Fatalf("leftovers: %v", left)
	}
}

// TestFakeBoardHistoryIsStatusWrites: karvi records every /update in the
// task's history with the status the task has, so a blocked task whose
// result is written after its status shows blocked twice; only a write
// that changed the status is a status change.
func TestFakeBoardHistoryIsStatusWrites(t *testing.T) {
	k := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	url, err := k.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.AddTask(karvifake.Task{ID: "a", Status: "in_progress"}); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	post("/api/tasks/a/status", `{"status":"blocked","reason":"boom"}`)
	post("/api/tasks/a/update", `{"result":{"summary":"boom"}}`)
	post("/api/tasks/a/update", `{"status":"in_progress"}`)
	bt, _, err := FakeBoard(k).Task("a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range bt.History {
		got = append(got, h.Status)
	}
	if strings.Join(got, " ") != "blocked in_progress" {
		t.Fatalf("status changes %q, want blocked then in_progress (the result's update changed nothing)", got)
	}
}
