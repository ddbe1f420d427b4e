package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/internal/devenv"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/workflows"
)

// server is the dev server every test shares; each test has its own task
// queue, work root and worker, so tests do not see each other's tasks.
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
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer s.Stop()
		server = s
		return m.Run()
	}()
	os.Exit(code)
}

type rigOptions struct {
	sink     string // file (default) or karvi
	karviURL string
	// cargoExit is what the stub `cargo` on the worker's PATH exits with, so
	// the default template's `cargo test` check really runs and passes or fails.
	cargoExit int
	scenario  string // EDDASIM_SCENARIO
	env       []string
}

type rig struct {
	t        *testing.T
	opts     rigOptions
	dir      string
	workRoot string
	sinkDir  string
	queue    string
	env      []string
	worker   *devenv.Worker
	cl       client.Client
	workers  int
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: needs the dev server (run without -short)")
	}
	dir := t.TempDir()
	r := &rig{t: t, opts: o, dir: dir,
		workRoot: filepath.Join(dir, "work"), sinkDir: filepath.Join(dir, "briefs"),
		queue: "e2e-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))}
	stubs := filepath.Join(dir, "stubs")
	require.NoError(t, os.MkdirAll(stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stubs, "cargo"),
		[]byte(fmt.Sprintf("#!/bin/sh\nexit %d\n", o.cargoExit)), 0o755))
	r.env = append([]string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH")}, o.env...)
	if o.scenario != "" {
		r.env = append(r.env, "EDDASIM_SCENARIO="+o.scenario)
	}
	cl, err := server.Client()
	require.NoError(t, err)
	r.cl = cl
	t.Cleanup(func() {
		if r.worker != nil {
			_ = r.worker.Stop()
		}
		require.NoError(t, devenv.StopConductors(r.workRoot), "stop leftover conductors")
		cl.Close()
		if t.Failed() {
			r.dumpLogs()
		}
	})
	r.startWorker()
	return r
}

func (r *rig) startWorker() {
	r.t.Helper()
	sim, err := devenv.Binary("eddasim")
	require.NoError(r.t, err)
	templates, err := devenv.TemplatesDir()
	require.NoError(r.t, err)
	r.workers++
	w, err := devenv.StartWorker(devenv.WorkerOptions{
		Addr: server.Addr, TaskQueue: r.queue, WorkRoot: r.workRoot, Conductor: sim,
		Sink: r.opts.sink, SinkDir: r.sinkDir, KarviURL: r.opts.karviURL, Env: r.env,
		LogPath:   filepath.Join(r.dir, fmt.Sprintf("worker-%d.log", r.workers)),
		Templates: templates,
	})
	require.NoError(r.t, err)
	r.worker = w
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
// "sequential" template (the seed's phase order).
func dispatch(t *testing.T, taskID, message string) mapping.DispatchPlan {
	t.Helper()
	d, err := devenv.SeedDispatch(taskID, message)
	require.NoError(t, err)
	return d
}

// seedCosts makes the simulator report example A's costs per phase.
const seedCosts = "[sim phase=implement cost=0.85] [sim phase=test cost=0.42] [sim phase=docs cost=0.18]"

func (r *rig) start(d mapping.DispatchPlan) client.WorkflowRun {
	r.t.Helper()
	run, err := r.cl.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:                                       workflows.WorkflowID(d.TaskID),
		TaskQueue:                                r.queue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, workflows.TaskWorkflowName, workflows.TaskInput{Dispatch: d})
	require.NoError(r.t, err)
	return run
}

func (r *rig) result(run client.WorkflowRun) workflows.Result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(r.t, run.Get(ctx, &res))
	return res
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

// normalizeBrief decodes a brief without what depends on the clock.
func normalizeBrief(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m, err := devenv.NormalizeBrief(data)
	require.NoError(t, err)
	return m
}

func normalize(v any) any { return devenv.Normalize(v) }
