package faults

// The shared rig of the fault suite. Other files of this package (owned by
// other people) build on it, so its API is kept stable: add, do not change.
//
// Every test gets its own task queue, work root, sink and worker process on
// the dev server TestMain starts (or on a dedicated server it passes in), so
// tests never see each other's tasks. Cleanup stops the worker, terminates
// any workflow the rig started that is still open, stops every conductor
// recorded under the work root, and fails the test if a run process outlives
// all that.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/internal/karvifake"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

// server is the dev server every test shares unless it brings its own.
var server *devenv.Server

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		if testing.Short() {
			return m.Run()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := devenv.StartServer(ctx, devenv.ServerOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults:", err)
			return 1
		}
		defer s.Stop()
		server = s
		return m.Run()
	}()
	os.Exit(code)
}

// seedCosts makes the simulator report example A's costs per phase.
const seedCosts = "[sim phase=implement cost=0.85] [sim phase=test cost=0.42] [sim phase=docs cost=0.18]"

type rigOptions struct {
	// sink is "file" (default) or "karvi". With "karvi" and no karviURL the
	// rig starts an in-process karvifake (rig.karvi) on 127.0.0.1.
	sink       string
	karviURL   string
	karviToken string // the fake's admin token and the worker's KARVI_API_TOKEN
	// cargoExit is what the stub `cargo` on the worker's PATH exits with, so
	// the template's `cargo test` check really runs and passes or fails.
	cargoExit int
	scenario  string   // EDDASIM_SCENARIO
	env       []string // more worker (and so conductor) environment
	// server is a dedicated dev server; nil means the shared one.
	server *devenv.Server
	// workerArgs are extra worker flags, e.g. -tail-poll.
	workerArgs []string
	// noWorker leaves starting the first worker to the test.
	noWorker bool
	// karviWrap, with the karvi sink, serves the karvifake through this
	// wrapper on a listener of the rig's own (latency, counting, ...).
	// karvi.SetDown is then unavailable.
	karviWrap func(http.Handler) http.Handler
}

type rig struct {
	t        *testing.T
	opts     rigOptions
	srv      *devenv.Server
	dir      string
	workRoot string
	sinkDir  string
	queue    string
	env      []string
	cl       client.Client
	karvi    *karvifake.Server // nil unless the rig started one

	mu      sync.Mutex
	worker  *devenv.Worker
	workers int
	started []string // workflow ids this rig started
}

var rigCount atomic.Int64

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite: needs the dev server (run without -short)")
	}
	srv := o.server
	if srv == nil {
		srv = server
	}
	dir := t.TempDir()
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	r := &rig{t: t, opts: o, srv: srv, dir: dir,
		workRoot: filepath.Join(dir, "work"), sinkDir: filepath.Join(dir, "briefs"),
		queue: fmt.Sprintf("faults-%s-%d", name, rigCount.Add(1))}
	stubs := filepath.Join(dir, "stubs")
	require.NoError(t, os.MkdirAll(stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stubs, "cargo"),
		[]byte(fmt.Sprintf("#!/bin/sh\nexit %d\n", o.cargoExit)), 0o755))
	r.env = append([]string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH")}, o.env...)
	if o.scenario != "" {
		r.env = append(r.env, "EDDASIM_SCENARIO="+o.scenario)
	}
	if o.karviToken != "" {
		r.env = append(r.env, "KARVI_API_TOKEN="+o.karviToken)
	}
	if o.sink == "karvi" && o.karviURL == "" {
		r.karvi = karvifake.New(karvifake.Options{Token: o.karviToken})
		if o.karviWrap == nil {
			url, err := r.karvi.Start()
			require.NoError(t, err)
			r.opts.karviURL = url
			t.Cleanup(r.karvi.Close)
		} else {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			hs := &http.Server{Handler: o.karviWrap(r.karvi.Handler()), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = hs.Serve(ln) }()
			r.opts.karviURL = "http://" + ln.Addr().String()
			t.Cleanup(func() { _ = hs.Close() })
		}
	}
	cl, err := srv.Client()
	require.NoError(t, err)
	r.cl = cl
	t.Cleanup(func() { r.cleanup() })
	if !o.noWorker {
		r.startWorker()
	}
	return r
}

func (r *rig) cleanup() {
	t := r.t
	r.mu.Lock()
	w := r.worker
	r.worker = nil
	r.mu.Unlock()
	if w != nil {
		_ = w.Stop()
	}
	// A failed test may leave its workflows open; close them so a later
	// test reusing a task id is not refused.
	for _, id := range r.started {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.cl.TerminateWorkflow(ctx, id, "", "fault suite cleanup")
		cancel()
	}
	require.NoError(t, devenv.StopConductors(r.workRoot), "stop leftover conductors")
	left, err := devenv.RunProcesses(r.workRoot)
	require.NoError(t, err)
	require.Empty(t, left, "run processes outlived their conductors' groups")
	r.cl.Close()
	if t.Failed() {
		r.dumpLogs()
	}
}

// startWorker starts a worker process (a new one each call) and returns it.
func (r *rig) startWorker() *devenv.Worker {
	r.t.Helper()
	sim, err := devenv.Binary("eddasim")
	require.NoError(r.t, err)
	templates, err := devenv.TemplatesDir()
	require.NoError(r.t, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers++
	w, err := devenv.StartWorker(devenv.WorkerOptions{
		Addr: r.srv.Addr, TaskQueue: r.queue, WorkRoot: r.workRoot, Conductor: sim,
		Sink: r.opts.sink, SinkDir: r.sinkDir, KarviURL: r.opts.karviURL, Env: r.env,
		LogPath:   filepath.Join(r.dir, fmt.Sprintf("worker-%d.log", r.workers)),
		Templates: templates, Args: r.opts.workerArgs,
	})
	require.NoError(r.t, err)
	r.worker = w
	return w
}

// killWorker SIGKILLs the current worker, as a crash would. It is safe to
// call from another goroutine than the test's.
func (r *rig) killWorker() error {
	r.mu.Lock()
	w := r.worker
	r.worker = nil
	r.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Kill()
}

func (r *rig) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(r.dir, "worker-*.log"))
	more, _ := filepath.Glob(filepath.Join(r.workRoot, "runs", "*", "*", "*.log"))
	for _, p := range append(logs, more...) {
		data, _ := os.ReadFile(p)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		r.t.Logf("==== %s\n%s", p, data)
	}
}

// workspace makes the task's working directory a git repository the
// seed template's real checks pass in (devenv.GitWorkspace).
func (r *rig) workspace(taskID string) string {
	r.t.Helper()
	dir := filepath.Join(r.workRoot, "tasks", taskID)
	require.NoError(r.t, devenv.GitWorkspace(dir))
	return dir
}

// dispatch is seed example A's DispatchPlan for taskID with message, on the
// "sequential" template (implement, test, docs in the seed's order).
func dispatch(t *testing.T, taskID, message string) mapping.DispatchPlan {
	t.Helper()
	d, err := devenv.SeedDispatch(taskID, message)
	require.NoError(t, err)
	return d
}

// addKarviTask gives the rig's karvifake a task with an empty brief, as
// karvi has it when it dispatches (status "dispatched").
func (r *rig) addKarviTask(taskID string) {
	r.t.Helper()
	require.NotNil(r.t, r.karvi, "rig has no karvifake (sink karvi without karviURL)")
	require.NoError(r.t, r.karvi.AddTask(karvifake.Task{ID: taskID, Title: "task " + taskID,
		Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)}))
}

// start starts the task workflow for d; see startInput.
func (r *rig) start(d mapping.DispatchPlan) client.WorkflowRun {
	r.t.Helper()
	return r.startInput(workflows.TaskInput{Dispatch: d})
}

// startInput starts a task workflow on the rig's queue. With a karvifake it
// first adds the task there if karvi does not know it yet.
func (r *rig) startInput(in workflows.TaskInput) client.WorkflowRun {
	r.t.Helper()
	run, err := r.tryStart(in)
	require.NoError(r.t, err)
	return run
}

// tryStart is startInput returning the error, for tests of refused starts.
func (r *rig) tryStart(in workflows.TaskInput) (client.WorkflowRun, error) {
	if r.karvi != nil && in.Dispatch.TaskID != "" {
		if _, ok := r.karvi.Task(in.Dispatch.TaskID); !ok {
			r.addKarviTask(in.Dispatch.TaskID)
		}
	}
	id := workflows.WorkflowID(in.Dispatch.TaskID)
	run, err := r.cl.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                r.queue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, workflows.TaskWorkflowName, in)
	if err == nil {
		r.started = append(r.started, id)
	}
	return run, err
}

// result waits for the workflow's result; the 3-minute deadline only keeps
// a hung test from hanging the suite.
func (r *rig) result(run client.WorkflowRun) workflows.Result {
	r.t.Helper()
	res, err := r.resultErr(run)
	require.NoError(r.t, err)
	return res
}

func (r *rig) resultErr(run client.WorkflowRun) (workflows.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.Result
	err := run.Get(ctx, &res)
	return res, err
}

func (r *rig) status(taskID string) (workflows.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return devenv.QueryStatus(ctx, r.cl, taskID)
}

// waitFor polls the status query until cond holds. The deadline is a safety
// net against a hung test, not a timing assertion.
func (r *rig) waitFor(taskID, what string, cond func(workflows.Status) bool) workflows.Status {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := devenv.WaitStatus(ctx, r.cl, taskID, cond)
	if err != nil {
		r.t.Fatalf("task %s: %s never happened: %v", taskID, what, err)
	}
	return s
}

func (r *rig) waitPhase(taskID, phase string) workflows.Status {
	return r.waitFor(taskID, "phase "+phase+" running", func(s workflows.Status) bool {
		return s.CurrentPhase == phase && s.Stage == "running" && s.ConductorPID > 0
	})
}

func (r *rig) signal(taskID, name string, arg any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.cl.SignalWorkflow(ctx, workflows.WorkflowID(taskID), "", name, arg)
}

// taskDir is the conductor's cwd for a task without a workingDir.
func (r *rig) taskDir(taskID string) string { return filepath.Join(r.workRoot, "tasks", taskID) }

// eventsPath is a plan's events.jsonl as the conductor writes it.
func (r *rig) eventsPath(taskID, plan string) string {
	return filepath.Join(r.taskDir(taskID), ".edda", "conductor", plan, "events.jsonl")
}

// events are a plan's conductor events, decoded.
func (r *rig) events(taskID, plan string) []map[string]any {
	return readJSONL(r.t, r.eventsPath(taskID, plan))
}

// fileBrief is what the file sink holds for a task: the merged brief,
// without what depends on the clock.
func (r *rig) fileBrief(taskID string) map[string]any {
	m, err := devenv.FileBrief(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return m
}

// filePatches are the PATCH bodies the file sink received, in order.
func (r *rig) filePatches(taskID string) []map[string]any {
	out, err := devenv.FilePatches(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return out
}

func (r *rig) fileStatus(taskID string) map[string]any {
	m, err := devenv.FileStatus(r.sinkDir, taskID)
	require.NoError(r.t, err)
	return m
}

// karviBrief is the brief karvifake holds for a task, normalized and with
// null values dropped: PATCH cannot delete a key, so a redispatch resets
// the previous attempt's keys to null, which reads as absent.
func (r *rig) karviBrief(taskID string) map[string]any {
	r.t.Helper()
	b := r.karvi.Brief(taskID)
	require.NotNil(r.t, b, "karvi has no brief for %s", taskID)
	return normalize(dropNulls(b)).(map[string]any)
}

// karviPatches are the brief PATCH bodies karvifake accepted for a task, in
// arrival order.
func (r *rig) karviPatches(taskID string) []json.RawMessage {
	var out []json.RawMessage
	for _, w := range r.karvi.Writes(taskID) {
		if w.Method == "PATCH" && strings.HasPrefix(w.Path, "/api/brief/") {
			out = append(out, w.Body)
		}
	}
	return out
}

// karviStatus is the task's status in karvifake.
func (r *rig) karviStatus(taskID string) string {
	r.t.Helper()
	task, ok := r.karvi.Task(taskID)
	require.True(r.t, ok, "karvi has no task %s", taskID)
	return task.Status
}

// history is the event history of the task's latest workflow run.
func (r *rig) history(taskID string) *historypb.History {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := r.cl.GetWorkflowHistory(ctx, workflows.WorkflowID(taskID), "", false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(r.t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

// replay runs the task workflow's current code over a recorded history; a
// change of the workflow that is not replay-safe fails here.
func replay(h *historypb.History) error {
	rep := worker.NewWorkflowReplayer()
	workflows.Register(rep)
	return rep.ReplayWorkflowHistory(nil, h)
}

// liveConductors are the runs under the work root with a running process.
func (r *rig) liveConductors() []proc.Handle {
	r.t.Helper()
	live, err := devenv.LiveConductors(r.workRoot)
	require.NoError(r.t, err)
	return live
}

// assertNoOrphans fails unless every conductor run under the work root is
// gone: supervisor, group, and any process carrying a run's token.
func (r *rig) assertNoOrphans() {
	r.t.Helper()
	require.Empty(r.t, r.liveConductors(), "conductor runs still alive")
	left, err := devenv.RunProcesses(r.workRoot)
	require.NoError(r.t, err)
	require.Empty(r.t, left, "processes of finished runs still running")
}

// seedBriefFor is seed example A's final brief for another task and plan
// name, normalized: what an undisturbed run of the seed plan ends with.
func seedBriefFor(t *testing.T, taskID, planName string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "A", "brief.json"))
	require.NoError(t, err)
	b := normalizeBrief(t, data)
	b["meta"].(map[string]any)["taskId"] = taskID
	b["plan"].(map[string]any)["name"] = planName
	return b
}

// reducedBrief is the brief the seed's reducer makes of a plan's
// events.jsonl, as written on disk (none when the conductor never started),
// normalized without nulls: what the sink must hold when no event was lost
// or applied twice on the way.
func (r *rig) reducedBrief(taskID, plan string) map[string]any {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.workRoot, "runs", taskID, plan, "plan.yaml"))
	require.NoError(r.t, err)
	p, err := mapping.ParsePlan(data)
	require.NoError(r.t, err)
	st := mapping.NewBriefState(taskID, p.Summary())
	raw, err := os.ReadFile(r.eventsPath(taskID, plan))
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = nil, nil // the conductor never started: the skeleton only
	}
	require.NoError(r.t, err)
	off := int64(0)
	for line := range bytes.SplitSeq(raw, []byte{'\n'}) {
		at := off
		off += int64(len(line)) + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := mapping.ParseEvent(line)
		require.NoError(r.t, err, "event at offset %d", at)
		ev.Pos = mapping.Position{Offset: at}
		st.Apply(ev)
	}
	return normalize(dropNulls(jsonValue(r.t, st.Brief))).(map[string]any)
}

// jsonValue round-trips v through JSON into maps and slices.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	var out any
	require.NoError(t, json.Unmarshal(mustJSON(t, v), &out))
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	out, err := devenv.ReadJSONL(path)
	require.NoError(t, err)
	return out
}

// normalizeBrief decodes a brief without what depends on the clock.
func normalizeBrief(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m, err := devenv.NormalizeBrief(data)
	require.NoError(t, err)
	return m
}

func normalize(v any) any { return devenv.Normalize(v) }

// dropNulls removes null members of objects, at any depth.
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if val != nil {
				out[k] = dropNulls(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = dropNulls(e)
		}
		return out
	default:
		return v
	}
}

// singleRun asserts that one conductor process wrote a plan's events.jsonl
// from start to end, and returns the events. Every edda (and simulator)
// process numbers its events from seq 0 and a resumed run writes no
// plan_start, so a second process for the same attempt shows as a second
// plan_start or as seq going back.
func (r *rig) singleRun(taskID, plan string) []map[string]any {
	r.t.Helper()
	evs := r.events(taskID, plan)
	require.NotEmpty(r.t, evs, "%s: no events", plan)
	starts := 0
	for i, ev := range evs {
		require.Equal(r.t, float64(i), ev["seq"], "%s: event %d has seq %v: a second conductor process wrote here", plan, i, ev["seq"])
		if ev["type"] == "plan_start" {
			starts++
		}
	}
	require.Equal(r.t, "plan_start", evs[0]["type"], "%s: first event", plan)
	require.Equal(r.t, 1, starts, "%s: plan_start events", plan)
	hs, err := filepath.Glob(filepath.Join(r.workRoot, "runs", taskID, plan, "handle.json"))
	require.NoError(r.t, err)
	require.Len(r.t, hs, 1, "%s: one run record", plan)
	return evs
}

// logPerEvent asserts that a brief's log has exactly one entry per
// conductor event, in order: none lost, none doubled. plan_aborted is the
// one event that writes no entry (the task status carries it instead).
func logPerEvent(t *testing.T, brief map[string]any, events []map[string]any) {
	t.Helper()
	var want []any
	for _, ev := range events {
		if ev["type"] != "plan_aborted" {
			want = append(want, ev["type"])
		}
	}
	log, _ := brief["log"].([]any)
	var got []any
	for _, e := range log {
		entry, _ := e.(map[string]any)
		got = append(got, entry["action"])
	}
	require.Equal(t, want, got, "brief log actions vs events.jsonl types")
}

// conductorSampler watches the process table while a test runs and keeps,
// per task, the most conductor runs it ever saw alive at once.
type conductorSampler struct {
	stop, done chan struct{}
	max        map[string]int
	samples    int
	err        error
}

// sampleConductors samples the live runs under the work root every 20 ms
// until Stop.
func (r *rig) sampleConductors() *conductorSampler {
	s := &conductorSampler{stop: make(chan struct{}), done: make(chan struct{}), max: map[string]int{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			live, err := devenv.LiveRunsByTask(r.workRoot)
			if err != nil {
				s.err = err
				return
			}
			s.samples++
			for task, n := range live {
				s.max[task] = max(s.max[task], n)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and asserts that no task ever had two live
// conductor runs; it returns the number of samples taken.
func (s *conductorSampler) Stop(t *testing.T) int {
	t.Helper()
	close(s.stop)
	<-s.done
	require.NoError(t, s.err, "sampling the process table")
	require.NotZero(t, s.samples)
	for task, n := range s.max {
		require.LessOrEqual(t, n, 1, "task %s had %d live conductors at once", task, n)
	}
	return s.samples
}

// atMostOneRun asserts that no second conductor process wrote a plan's
// events.jsonl (see singleRun); a plan whose conductor never started has
// no events, which is fine here.
func (r *rig) atMostOneRun(taskID, plan string) {
	r.t.Helper()
	if _, err := os.Stat(r.eventsPath(taskID, plan)); err != nil {
		return
	}
	for i, ev := range r.events(taskID, plan) {
		require.Equal(r.t, float64(i), ev["seq"], "%s: event %d has seq %v: a second conductor process wrote here", plan, i, ev["seq"])
		if i > 0 {
			require.NotEqual(r.t, "plan_start", ev["type"], "%s: a second plan_start", plan)
		}
	}
}
