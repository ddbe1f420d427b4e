//go:build realserver

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/tracing"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/jaeger"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
	"karvi-edda-temporal/traces"
)

// A task traced into a real Jaeger, its worker SIGKILLed in the middle of
// a phase and started again: the trace, read back through Jaeger's HTTP
// API, is one trace that begins at the starter's start, holds the task,
// its attempt, every phase attempt (the check that failed once too) and
// under each the agent's tool calls, each span once, and its phases' costs
// add up to the brief's total.
var traceTasks atomic.Int64

func TestTraceInJaeger(t *testing.T) {
	ctx := context.Background()
	j, err := jaeger.Start(ctx, filepath.Join(t.TempDir(), "jaeger.log"))
	require.NoError(t, err)
	t.Cleanup(j.Stop)
	service := fmt.Sprintf("karvi-e2e-%d", time.Now().UnixNano())
	r := testrig.New(t, testrig.Options{Env: j.Env(service)})
	// A task id of its own: a start of a task id whose workflow ran
	// before (an earlier -count) is the task's next attempt.
	task := fmt.Sprintf("TR%d", traceTasks.Add(1))
	r.Workspace(task)
	d := testrig.Dispatch(t, task, "Add user authentication with JWT. "+testrig.ExampleCosts+
		" [sim tools=3] [sim phase=test fail=1 delay=2s]")
	id := traces.ForTask(d.TaskID, d.PlanID)

	// The starter, traced like the worker, begins the trace.
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	path := filepath.Join(r.Dir, "dispatch.json")
	require.NoError(t, os.WriteFile(path, testrig.MustJSON(t, d), 0o644))
	cmd := exec.Command(starter, "start", "-address", r.Server.Addr, "-task-queue", r.Queue, path)
	cmd.Env = append(os.Environ(), j.Env(service)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	r.Track(taskapi.WorkflowID(task))
	run := r.Client.GetWorkflow(ctx, taskapi.WorkflowID(task), "")

	r.WaitPhase(task, "test")
	require.NoError(t, r.KillWorker())
	time.Sleep(500 * time.Millisecond) // the conductor writes on while no worker runs
	r.StartWorker()

	res := r.Result(run)
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	brief := r.FileBrief(task)
	total := brief["cost"].(map[string]any)["total_usd"].(float64)

	// Phase attempts: implement, test (failed its check), test, docs;
	// each agent made 3 tool calls.
	const phaseAttempts, tools = 4, 3
	var tr *jaeger.Trace
	wait.EventuallyEvery(t, 60*time.Second, 250*time.Millisecond, "the task's trace in Jaeger, whole", func() (any, bool) {
		got, err := j.Trace(ctx, id.TraceID().String())
		if err != nil || got == nil {
			return err, false
		}
		tr = got
		var agents, toolCalls, starts, workflows, deliveries int
		root := false
		for _, s := range got.Spans {
			switch {
			case strings.HasPrefix(s.OperationName, "invoke_agent "):
				agents++
			case strings.HasPrefix(s.OperationName, "execute_tool "):
				toolCalls++
			case s.OperationName == "StartWorkflow:"+taskapi.TaskWorkflowName:
				starts++
			case s.OperationName == "RunWorkflow:"+taskapi.TaskWorkflowName:
				workflows++
			case s.OperationName == "RunActivity:DeliverEvents", s.OperationName == "RunActivity:StartAttempt":
				// Both read events: after the kill, the restarted worker's
				// retried start may read the phases' ends itself, with no
				// delivery of its own left to run.
				deliveries++
			}
			root = root || s.SpanID == id.RootSpanID().String()
		}
		// The worker's own Temporal spans leave in batches (every 5 s).
		return fmt.Sprintf("%d spans: %d agents, %d tool calls, %d starts, %d workflows, %d deliveries, root %v",
				len(got.Spans), agents, toolCalls, starts, workflows, deliveries, root),
			root && agents >= phaseAttempts && toolCalls >= phaseAttempts*tools && starts >= 1 && workflows >= 1 && deliveries >= 1
	})

	// One trace of this task among the service's.
	all, err := j.Traces(ctx, service)
	require.NoError(t, err)
	var mine []string
	for _, x := range all {
		for _, s := range x.Spans {
			if s.Tag(traces.AttrTaskID) == task || s.Tag("temporalWorkflowID") == taskapi.WorkflowID(task) {
				mine = append(mine, x.TraceID)
				if x.TraceID != id.TraceID().String() {
					for _, s := range x.Spans {
						t.Logf("another trace %s: %s (parent %q)", x.TraceID, s.OperationName, s.Parent())
					}
				}
				break
			}
		}
	}
	require.Equal(t, []string{id.TraceID().String()}, mine, "the task's spans are in one trace")

	// Every span once.
	byID := map[string]jaeger.Span{}
	for _, s := range tr.Spans {
		_, dup := byID[s.SpanID]
		require.False(t, dup, "span %s (%s) exported twice", s.SpanID, s.OperationName)
		byID[s.SpanID] = s
	}

	// The tree: task, attempt, phase attempts, tool and model calls.
	root := byID[id.RootSpanID().String()]
	require.Equal(t, "task "+task, root.OperationName)
	require.Empty(t, root.Parent(), "the task is the trace's root")
	attempt, ok := byID[id.AttemptSpanID(1).String()]
	require.True(t, ok, "attempt 1's span")
	require.Equal(t, root.SpanID, attempt.Parent())

	var phases []string
	var phaseCost float64
	var linked, linkedFound int
	toolIDs := map[string]bool{}
	for _, s := range tr.Spans {
		if s.Tag(traces.AttrOperation) != traces.OpInvokeAgent {
			continue
		}
		require.Equal(t, attempt.SpanID, s.Parent(), "phase span %s under the attempt", s.OperationName)
		phases = append(phases, fmt.Sprintf("%s/%v/%s", s.Tag(traces.AttrPhase), s.Tag(traces.AttrPhaseAttempt), s.Tag(traces.AttrPhaseOutcome)))
		phaseCost += s.Tag(traces.AttrCostUSD).(float64)
		for _, ref := range s.References {
			if ref.RefType != "CHILD_OF" {
				linked++
				if a, ok := byID[ref.SpanID]; ok && strings.HasPrefix(a.OperationName, "RunActivity:") {
					linkedFound++
				}
			}
		}
		if s.Tag(traces.AttrPhaseOutcome) == "failed" {
			require.Equal(t, "check_failed", s.Tag(traces.AttrErrorType))
			require.Equal(t, true, s.Tag("error"), "a failed phase's span is an error")
		}
		var calls int
		for _, c := range tr.Spans {
			if c.Parent() != s.SpanID || c.Tag(traces.AttrOperation) != traces.OpExecuteTool {
				continue
			}
			calls++
			callID := c.Tag(traces.AttrToolCallID).(string)
			require.False(t, toolIDs[callID], "tool call %s twice", callID)
			toolIDs[callID] = true
			require.Equal(t, s.Tag(traces.AttrPhase), c.Tag(traces.AttrPhase), "a tool call hangs under its own phase")
			require.NotEmpty(t, c.Tag(traces.AttrToolName))
		}
		require.Equal(t, tools, calls, "tool calls of %s", s.OperationName)
	}
	// Each phase links the Temporal activity that delivered its end (one
	// of the killed worker's may never have reached Jaeger).
	require.Equal(t, phaseAttempts, linked, "links from the phase spans to their deliveries")
	require.Positive(t, linkedFound, "a phase's delivery in the trace")
	slices.Sort(phases)
	require.Equal(t, []string{"docs/1/passed", "implement/1/passed", "test/1/failed", "test/2/passed"}, phases)
	require.Len(t, toolIDs, phaseAttempts*tools)
	require.InDelta(t, total, phaseCost, 1e-9, "the phase attempts' costs add up to the brief's total")
	if c, ok := root.Tag(traces.AttrCostUSD).(float64); ok {
		require.InDelta(t, total, c, 1e-9, "the task's cost is the brief's total")
	}

	// Temporal's spans are in the same trace: the start under the task's
	// root, the workflow and its deliveries after it.
	var start *jaeger.Span
	ops := map[string]int{}
	for i, s := range tr.Spans {
		ops[s.OperationName]++
		if s.OperationName == "StartWorkflow:"+taskapi.TaskWorkflowName {
			start = &tr.Spans[i]
		}
	}
	require.NotNil(t, start, "the starter's span: %v", ops)
	require.Equal(t, root.SpanID, start.Parent(), "the start hangs under the task's root")
	require.Positive(t, ops["RunWorkflow:"+taskapi.TaskWorkflowName], "the workflow's span: %v", ops)
	require.Positive(t, ops["RunActivity:DeliverEvents"]+ops["RunActivity:StartAttempt"], "the spans of the activities that read events: %v", ops)

	// Every span of the runtime's own hangs under one in the trace.
	for _, s := range tr.Spans {
		if s.Tag(traces.AttrTaskID) == nil || s.SpanID == root.SpanID {
			continue
		}
		_, ok := byID[s.Parent()]
		require.True(t, ok, "span %s (%s) has no parent in the trace", s.SpanID, s.OperationName)
	}
}

// Spans exported by OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) and
// over HTTP reach Jaeger alike, and a second export of the same spans
// through the ledger sends nothing.
func TestTraceExportProtocols(t *testing.T) {
	ctx := context.Background()
	j, err := jaeger.Start(ctx, filepath.Join(t.TempDir(), "jaeger.log"))
	require.NoError(t, err)
	t.Cleanup(j.Stop)
	for _, c := range []struct{ proto, endpoint string }{
		{"grpc", "http://" + j.OTLPGRPC},
		{"http/protobuf", "http://" + j.OTLPHTTP},
	} {
		t.Run(c.proto, func(t *testing.T) {
			service := fmt.Sprintf("karvi-proto-%d", time.Now().UnixNano())
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.proto)
			t.Setenv("OTEL_SERVICE_NAME", service)
			tr, err := tracing.FromEnv(ctx)
			require.NoError(t, err)
			require.NotNil(t, tr)
			defer tr.Shutdown(ctx)
			id := traces.Identity{TaskID: service}
			t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
			spans := []traces.Span{
				{TraceID: id.TraceID(), SpanID: id.RootSpanID(), Name: "task " + service, Start: t0, End: t0.Add(time.Second)},
				{TraceID: id.TraceID(), SpanID: id.AttemptSpanID(1), Parent: id.TaskSpanID(), Name: "attempt 1", Start: t0, End: t0.Add(time.Second)},
			}
			e := tracing.NewEmitter(tr, t.TempDir())
			n, err := e.Emit(ctx, "run-x", spans)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			n, err = e.Emit(ctx, "run-x", spans)
			require.NoError(t, err)
			require.Zero(t, n, "the ledger holds them")
			wait.Eventually(t, 30*time.Second, "the spans in Jaeger", func() (any, bool) {
				got, err := j.Trace(ctx, id.TraceID().String())
				if err != nil || got == nil {
					return err, false
				}
				return len(got.Spans), len(got.Spans) == 2
			})
		})
	}
}

// A run traced from the starter's `run start`: one trace, the run's span
// its root, each task's span under it, and each task's attempt and phase
// spans under the task.
func TestRunTraceInJaeger(t *testing.T) {
	ctx := context.Background()
	j, err := jaeger.Start(ctx, filepath.Join(t.TempDir(), "jaeger.log"))
	require.NoError(t, err)
	t.Cleanup(j.Stop)
	service := fmt.Sprintf("karvi-e2e-run-%d", time.Now().UnixNano())
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=100ms cost=0.10 tools=2", Env: j.Env(service)})
	slug := fmt.Sprintf("trace-run-%d", traceTasks.Add(1))
	a, b := slug+"-a", slug+"-b"
	runFile := fmt.Sprintf(`{"slug":%q,"title":"Traced","concurrency":2,"tasks":[
	 {"id":%q,"title":"A","complexity":2},
	 {"id":%q,"title":"B","depends":[%q],"complexity":2}]}`, slug, a, b, a)
	path := filepath.Join(r.Dir, "run.json")
	require.NoError(t, os.WriteFile(path, []byte(runFile), 0o644))
	starter, err := devenv.Binary("starter")
	require.NoError(t, err)
	cmd := exec.Command(starter, "run", "start", "-address", r.Server.Addr, "-task-queue", r.Queue, path)
	cmd.Env = append(os.Environ(), j.Env(service)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	r.Track(runapi.WorkflowID(slug))
	r.RunResult(r.Client.GetWorkflow(ctx, runapi.WorkflowID(slug), ""), 3*time.Minute)

	id := traces.ForRun(slug)
	tasks := map[string]traces.Identity{a: traces.ForTask(a, "run-"+slug+"-"+a), b: traces.ForTask(b, "run-"+slug+"-"+b)}
	var tr *jaeger.Trace
	wait.EventuallyEvery(t, 60*time.Second, 250*time.Millisecond, "the run's trace in Jaeger, whole", func() (any, bool) {
		got, err := j.Trace(ctx, id.TraceID().String())
		if err != nil || got == nil {
			return err, false
		}
		tr = got
		have := map[string]bool{}
		for _, s := range got.Spans {
			have[s.SpanID] = true
		}
		ok := have[id.RootSpanID().String()]
		for _, ti := range tasks {
			ok = ok && have[ti.TaskSpanID().String()] && have[ti.AttemptSpanID(1).String()]
		}
		return fmt.Sprintf("%d spans", len(got.Spans)), ok
	})
	byID := map[string]jaeger.Span{}
	for _, s := range tr.Spans {
		_, dup := byID[s.SpanID]
		require.False(t, dup, "span %s (%s) exported twice", s.SpanID, s.OperationName)
		byID[s.SpanID] = s
	}
	root := byID[id.RootSpanID().String()]
	require.Equal(t, "run "+slug, root.OperationName)
	require.Empty(t, root.Parent())
	for name, ti := range tasks {
		task := byID[ti.TaskSpanID().String()]
		require.Equal(t, "task "+name, task.OperationName)
		require.Equal(t, root.SpanID, task.Parent(), "task %s under the run", name)
		attempt := byID[ti.AttemptSpanID(1).String()]
		require.Equal(t, task.SpanID, attempt.Parent())
		var phases, tools int
		for _, s := range tr.Spans {
			if s.Parent() == attempt.SpanID && s.Tag(traces.AttrOperation) == traces.OpInvokeAgent {
				phases++
				for _, c := range tr.Spans {
					if c.Parent() == s.SpanID && c.Tag(traces.AttrOperation) == traces.OpExecuteTool {
						tools++
					}
				}
			}
		}
		require.Positive(t, phases, "task %s's phase spans", name)
		require.Equal(t, 2*phases, tools, "task %s's tool calls", name)
	}
	var starts int
	for _, s := range tr.Spans {
		if s.OperationName == "StartWorkflow:"+runapi.RunWorkflowName {
			starts++
			require.Equal(t, root.SpanID, s.Parent(), "the run's start under its root")
		}
	}
	require.Equal(t, 1, starts, "the starter's span of the run's start")
}
