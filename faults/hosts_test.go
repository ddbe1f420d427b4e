//go:build realserver

package faults

// A fleet of worker hosts on this one machine. Each host is a pid
// namespace of its own (`unshare --pid --fork --mount-proc`, so its /proc
// shows its processes only and no worker can see, inspect or signal
// another host's conductors), a work root of its own, and worker processes
// started inside the namespace with nsenter, one after the other, so that a
// restarted worker finds its host's conductors as a worker on a real
// machine would. The hosts share what a fleet shares: the Temporal
// server, the task queue, karvi (a karvifake) and the events directory.
//
// The namespace's first process is `sleep infinity`: it only holds the
// namespace open (it reaps nothing, and proc treats zombies as gone). Its
// death kills everything in the namespace, which is how a host is lost.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/task"
	hostq "karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/testkit/wait"
)

// fleetRig is a rig (the shared queue, its client, karvi) with hosts.
type fleetRig struct {
	*rig
	events string // the events directory every host shares
	stubs  string // a `cargo` that passes, first on every worker's PATH
	// template is a task workspace the template's checks pass in, copied
	// into each host's work root for every task (a task may run anywhere).
	template string
	hosts    map[string]*host
}

// host is one machine of the fleet.
type host struct {
	f    *fleetRig
	name string
	root string   // its work root
	env  []string // its workers' extra environment
	ns   *exec.Cmd
	init int // the namespace's first process, as our pid namespace numbers it

	mu      sync.Mutex
	worker  *nsWorker
	workers int
}

// nsWorker is a worker process inside a host's namespace.
type nsWorker struct {
	cmd  *exec.Cmd // nsenter, which waits for the worker
	pid  int       // the worker, as our pid namespace numbers it
	log  string
	done chan struct{}
	err  error
}

// newFleet makes a rig whose hosts are named names, with no worker
// running yet; env adds environment to one host's workers.
func newFleet(t *testing.T, names []string, env map[string][]string) *fleetRig {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the fleet tests need util-linux's %s (and root)", tool)
	}
	f := &fleetRig{rig: newRig(t, testrig.Options{Sink: "karvi", NoWorker: true}), hosts: map[string]*host{}}
	f.events = filepath.Join(f.Dir, "events")
	f.stubs = filepath.Join(f.Dir, "fleet-stubs")
	require.NoError(t, os.MkdirAll(f.stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.stubs, "cargo"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	f.template = filepath.Join(f.Dir, "workspace")
	require.NoError(t, testrig.GitWorkspace(f.template))
	for _, name := range names {
		f.hosts[name] = f.newHost(name, env[name])
	}
	// Before the rig's own cleanup: every namespace goes, and with it
	// every process any host ran.
	t.Cleanup(func() {
		for _, h := range f.hosts {
			h.lose()
		}
		for _, h := range f.hosts {
			left, err := testrig.RunProcesses(h.root)
			require.NoError(t, err)
			require.Empty(t, left, "processes of host %s outlived its namespace", h.name)
		}
		if t.Failed() {
			f.dumpLogs()
		}
	})
	return f
}

func (f *fleetRig) newHost(name string, env []string) *host {
	t := f.T()
	t.Helper()
	h := &host{f: f, name: name, root: filepath.Join(f.Dir, "hosts", name, "work"), env: env}
	require.NoError(t, os.MkdirAll(h.root, 0o755))
	h.ns = exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sleep", "infinity")
	// The namespace dies with the test process, whatever happens to it.
	h.ns.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, h.ns.Start())
	h.init = childOf(t, h.ns.Process.Pid)
	return h
}

// childOf is the one child of pid, once it has forked it.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	child := 0
	wait.EventuallyEvery(t, 30*time.Second, 5*time.Millisecond, fmt.Sprintf("process %d to fork", pid), func() (any, bool) {
		data, err := os.ReadFile(path)
		require.NoError(t, err, "process %d is gone", pid)
		if f := strings.Fields(string(data)); len(f) > 0 {
			child, err = strconv.Atoi(f[0])
			require.NoError(t, err)
			return nil, true
		}
		return "no child", false
	})
	return child
}

// start starts a worker of the host, inside its namespace, and waits until
// it polls both its queues.
func (h *host) start() *nsWorker {
	t := h.f.T()
	t.Helper()
	bin, err := devenv.Binary("worker")
	require.NoError(t, err)
	sim, err := devenv.Binary("eddasim")
	require.NoError(t, err)
	templates, err := testrig.TemplatesDir()
	require.NoError(t, err)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Nil(t, h.worker, "host %s already has a worker", h.name)
	h.workers++
	w := &nsWorker{log: filepath.Join(h.f.Dir, "hosts", h.name, fmt.Sprintf("worker-%d.log", h.workers)), done: make(chan struct{})}
	args := []string{"--target", strconv.Itoa(h.init), "--pid", "--mount", "--", bin,
		"-address", h.f.Server.Addr, "-task-queue", h.f.Queue, "-host", h.name, "-work-root", h.root,
		"-conductor", sim, "-templates", templates, "-sink", "karvi", "-karvi-url", h.f.Karvi.URL(),
		"-events-dir", h.f.events, "-stop-grace", "2s"}
	w.cmd = exec.Command("nsenter", args...)
	w.cmd.Env = append(append(os.Environ(),
		"PATH="+h.f.stubs+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TEMPORAL_CONFIG_FILE="+filepath.Join(os.TempDir(), "karvi-edda-no-profile.toml")), h.env...)
	logf, err := os.OpenFile(w.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	require.NoError(t, w.cmd.Start())
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	w.pid = childOf(t, w.cmd.Process.Pid)
	h.worker = w
	// Polling both queues: the SDK says so once per queue.
	wait.EventuallyEvery(t, time.Minute, 10*time.Millisecond, "worker of host "+h.name+" to poll", func() (any, bool) {
		data, _ := os.ReadFile(w.log)
		if strings.Count(string(data), `msg="Started Worker"`) >= 2 {
			return nil, true
		}
		select {
		case <-w.done:
			t.Fatalf("worker of host %s exited at start: %v\n%s", h.name, w.err, data)
		default:
		}
		return string(data), false
	})
	return w
}

// waitLog waits until the worker's log has a line containing s, and
// returns that line.
func (w *nsWorker) waitLog(t *testing.T, s string) string {
	t.Helper()
	found := ""
	wait.EventuallyEvery(t, time.Minute, 10*time.Millisecond, "the worker to log "+s, func() (any, bool) {
		data, _ := os.ReadFile(w.log)
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, s) {
				found = line
				return nil, true
			}
		}
		return string(data), false
	})
	return found
}

// stop asks the host's worker to stop (SIGTERM) and waits for it to exit;
// it must exit cleanly, by itself.
func (h *host) stop() {
	t := h.f.T()
	t.Helper()
	w := h.take()
	require.NotNil(t, w, "host %s has no worker", h.name)
	require.NoError(t, syscall.Kill(w.pid, syscall.SIGTERM))
	select {
	case <-w.done:
		require.NoError(t, w.err, "worker of host %s after SIGTERM", h.name)
	case <-time.After(2 * time.Minute): // a safety net: the drain is bounded by the stop grace
		t.Fatalf("worker of host %s did not exit after SIGTERM", h.name)
	}
}

// kill SIGKILLs the host's worker, as a crash would; its conductors run on.
func (h *host) kill() {
	t := h.f.T()
	t.Helper()
	w := h.take()
	require.NotNil(t, w, "host %s has no worker", h.name)
	require.NoError(t, syscall.Kill(w.pid, syscall.SIGKILL))
	<-w.done
}

// lose kills the host's namespace, and so everything on the host.
func (h *host) lose() {
	w := h.take()
	if h.ns.ProcessState == nil {
		_ = syscall.Kill(h.init, syscall.SIGKILL)
		_ = h.ns.Wait()
	}
	if w != nil {
		<-w.done
	}
}

func (h *host) take() *nsWorker {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.worker
	h.worker = nil
	return w
}

// logs are the host's worker logs, all of them, oldest first.
func (h *host) logs() string {
	var b strings.Builder
	for i := 1; i <= h.workers; i++ {
		data, _ := os.ReadFile(filepath.Join(h.f.Dir, "hosts", h.name, fmt.Sprintf("worker-%d.log", i)))
		b.Write(data)
	}
	return b.String()
}

// workspaces gives every task a workspace on every host.
func (f *fleetRig) workspaces(ids ...string) {
	t := f.T()
	t.Helper()
	for _, h := range f.hosts {
		for _, id := range ids {
			require.NoError(t, copyTree(f.template, filepath.Join(h.root, "tasks", id)))
		}
	}
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(dst, info.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, info.Mode().Perm())
	})
}

// start starts task id's workflow with message and the host grace.
func (f *fleetRig) start(id, message string, grace time.Duration) {
	f.T().Helper()
	f.StartInput(taskapi.TaskInput{Dispatch: testrig.Dispatch(f.T(), id, message),
		Tuning: &taskapi.Tuning{HostGrace: grace}})
}

// result waits for task id's workflow to end.
func (f *fleetRig) result(id string) taskapi.Result {
	t := f.T()
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a safety net
	defer cancel()
	var res taskapi.Result
	require.NoError(t, f.Client.GetWorkflow(ctx, taskapi.WorkflowID(id), "").Get(ctx, &res), "task %s", id)
	return res
}

// eventsOn is a plan's events.jsonl on a host.
func (f *fleetRig) eventsOn(host, id, plan string) string {
	return filepath.Join(f.hosts[host].root, "tasks", id, ".edda", "conductor", plan, "events.jsonl")
}

// ranOnce asserts that the attempt's conductor ran on its host alone, as
// one process from its first event to its last, and returns its events.
func (f *fleetRig) ranOnce(id string, a taskapi.AttemptSummary) []map[string]any {
	t := f.T()
	t.Helper()
	require.Contains(t, f.hosts, a.Host, "%s attempt %d: host", id, a.Attempt)
	for name, h := range f.hosts {
		_, err := os.Stat(filepath.Join(h.root, "runs", id, a.PlanName))
		require.Equal(t, name == a.Host, err == nil, "%s attempt %d has a run directory on host %s (it ran on %s)", id, a.Attempt, name, a.Host)
	}
	evs := testrig.ReadJSONL(t, f.eventsOn(a.Host, id, a.PlanName))
	require.NotEmpty(t, evs, "%s: no events", a.PlanName)
	require.Equal(t, "plan_start", evs[0]["type"], "%s: first event", a.PlanName)
	oneWriter(t, a.PlanName, evs)
	return evs
}

// routedToHosts asserts from the task's history that its activities ran
// where they belong: each ClaimHost on the shared queue; the StartAttempt,
// DeliverEvents and AbortConductor of an attempt on its host's queue,
// taken by that host; status writes, the read of the sink's brief
// after a host loss, and the agent account's join or limit, on the shared
// queue. It returns how many activities went to a host's queue.
func (f *fleetRig) routedToHosts(id string, res taskapi.Result) int {
	t := f.T()
	t.Helper()
	type scheduled struct{ typ, queue, host string }
	byID := map[int64]scheduled{}
	attempt, onHost := 0, 0
	for _, ev := range f.History(id).GetEvents() {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			typ, queue := a.GetActivityType().GetName(), a.GetTaskQueue().GetName()
			s := scheduled{typ: typ, queue: queue}
			switch typ {
			case "ClaimHost", "SetTaskStatus", "CatchUpBrief", "AccountUpdate":
				require.Equal(t, f.Queue, queue, "%s: %s on the shared queue", id, typ)
			default:
				if typ == "StartAttempt" {
					attempt++
					require.LessOrEqual(t, attempt, len(res.Attempts), "%s: more starts than attempts", id)
				}
				require.NotZero(t, attempt, "%s: %s before any attempt started", id, typ)
				s.host = res.Attempts[attempt-1].Host
				require.Equal(t, hostq.Queue(f.Queue, s.host), queue, "%s: %s of attempt %d on its host's queue", id, typ, attempt)
				onHost++
			}
			byID[ev.GetEventId()] = s
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			s := byID[a.GetScheduledEventId()]
			if s.host != "" {
				require.Contains(t, a.GetIdentity(), "@"+s.host+"@", "%s: %s of host %s taken by %s", id, s.typ, s.host, a.GetIdentity())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			// Only a lost host's activity may time out: waiting for it.
			a := ev.GetActivityTaskTimedOutEventAttributes()
			s := byID[a.GetScheduledEventId()]
			lost := res.Attempts[attempt-1].Ended == taskapi.EndedHostLost
			require.True(t, lost && a.GetFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START,
				"%s: %s on %s timed out: %v", id, s.typ, s.queue, a.GetFailure())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			s := byID[a.GetScheduledEventId()]
			require.Failf(t, "an activity failed", "%s: %s on %s: %v", id, s.typ, s.queue, a.GetFailure())
		}
	}
	require.Equal(t, len(res.Attempts), attempt, "%s: one StartAttempt per attempt", id)
	return onHost
}

func (f *fleetRig) dumpLogs() {
	t := f.T()
	for _, h := range f.hosts {
		logs := h.logs()
		if len(logs) > 8000 {
			logs = logs[len(logs)-8000:]
		}
		t.Logf("==== host %s\n%s", h.name, logs)
	}
}

// theirPlans are the plan names of a task's attempts, for messages.
func theirPlans(res taskapi.Result) []string {
	var out []string
	for _, a := range res.Attempts {
		out = append(out, fmt.Sprintf("%s@%s:%s", a.PlanName, a.Host, a.Ended))
	}
	return out
}
