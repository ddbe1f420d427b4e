//go:build realserver

package testrig

import (
	"context"
	"fmt"
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
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
)

// Options shape one test's rig.
type Options struct {
	// Sink is "file" (default) or "karvi". With "karvi" and no KarviURL the
	// rig starts an in-process karvifake (Rig.Karvi) on 127.0.0.1.
	Sink     string
	KarviURL string
	// KarviToken is the fake's admin token and the worker's KARVI_API_TOKEN.
	KarviToken string
	// KarviRateLimit is the fake's karvifake.Options.RateLimit: 0 is
	// karvi's default (120 a minute per client address), as a real karvi
	// runs; karvifake.RateLimitOff turns it off.
	KarviRateLimit int
	// KarviTimeScale is the fake's karvifake.Options.TimeScale: its rate
	// limit's minute at the time scale a scaled worker runs at.
	KarviTimeScale timescale.Scale
	// CargoExit is what the stub `cargo` on the worker's PATH exits with, so
	// the template's `cargo test` check really runs and passes or fails.
	CargoExit int
	Scenario  string   // EDDASIM_SCENARIO
	Env       []string // more worker (and so conductor) environment
	// Server is a dedicated dev server; nil means the suite's shared one.
	Server *devenv.Server
	// WorkerArgs are extra worker flags, e.g. -conductor or -codec-addr.
	WorkerArgs []string
	// NoWorker leaves starting the first worker to the test.
	NoWorker bool
	// KarviWrap, with the karvi sink, serves the karvifake through this
	// wrapper on a listener of the rig's own (latency, gates, ...).
	// Karvi.SetDown is then unavailable.
	KarviWrap func(http.Handler) http.Handler
}

// Rig is one test's world: its own task queue, work root, sink and worker
// process on a dev server, so tests never see each other's tasks. Its
// exported fields are for reading.
type Rig struct {
	Dir      string // the test's temporary directory, worker logs included
	WorkRoot string
	SinkDir  string // the file sink's directory
	Queue    string
	Server   *devenv.Server
	Client   client.Client
	Karvi    *karvifake.Server // nil unless the rig started one

	t    *testing.T
	opts Options
	env  []string

	mu      sync.Mutex
	worker  *devenv.Worker
	workers int
	started []string // workflow ids to close on cleanup
}

var rigCount atomic.Int64

var unsafeInQueue = regexp.MustCompile(`[^A-Za-z0-9]+`)

// New makes a rig for t and, unless o.NoWorker, starts its first worker.
// Cleanup stops the worker, terminates any workflow the rig started that is
// still open, stops every conductor recorded under the work root, and fails
// the test if a process of any run outlives all that.
func New(t *testing.T, o Options) *Rig {
	t.Helper()
	srv := o.Server
	if srv == nil {
		srv = shared
	}
	require.NotNil(t, srv, "no dev server: the suite's TestMain must call testrig.Main")
	dir := t.TempDir()
	name := strings.ToLower(unsafeInQueue.ReplaceAllString(t.Name(), "-"))
	r := &Rig{t: t, opts: o, Server: srv, Dir: dir,
		WorkRoot: filepath.Join(dir, "work"), SinkDir: filepath.Join(dir, "briefs"),
		Queue: fmt.Sprintf("%s-%s-%d", suite, name, rigCount.Add(1))}
	stubs := filepath.Join(dir, "stubs")
	require.NoError(t, os.MkdirAll(stubs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stubs, "cargo"),
		fmt.Appendf(nil, "#!/bin/sh\nexit %d\n", o.CargoExit), 0o755))
	r.env = append([]string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH")}, o.Env...)
	if o.Scenario != "" {
		r.env = append(r.env, "EDDASIM_SCENARIO="+o.Scenario)
	}
	if o.KarviToken != "" {
		r.env = append(r.env, "KARVI_API_TOKEN="+o.KarviToken)
	}
	if o.Sink == "karvi" && o.KarviURL == "" {
		r.startKarvi()
	}
	cl, err := srv.Client()
	require.NoError(t, err)
	r.Client = cl
	t.Cleanup(r.cleanup)
	if !o.NoWorker {
		r.StartWorker()
	}
	return r
}

// startKarvi serves a karvifake on 127.0.0.1, through KarviWrap if any.
func (r *Rig) startKarvi() {
	t := r.t
	r.Karvi = karvifake.New(karvifake.Options{Token: r.opts.KarviToken, RateLimit: r.opts.KarviRateLimit,
		TimeScale: r.opts.KarviTimeScale})
	if r.opts.KarviWrap == nil {
		url, err := r.Karvi.Start()
		require.NoError(t, err)
		r.opts.KarviURL = url
		t.Cleanup(r.Karvi.Close)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: r.opts.KarviWrap(r.Karvi.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	r.opts.KarviURL = "http://" + ln.Addr().String()
	t.Cleanup(func() { _ = hs.Close() })
}

func (r *Rig) cleanup() {
	t := r.t
	r.mu.Lock()
	w := r.worker
	r.worker = nil
	started := r.started
	r.mu.Unlock()
	if w != nil {
		_ = w.Stop()
	}
	// A failed test may leave its workflows open; close them so a later
	// test reusing a task id is not refused.
	// The worker's own agent account (one per queue) runs until stopped.
	for _, id := range append(started, accountapi.WorkflowID(accountapi.QueueAccount(r.Queue))) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.Client.TerminateWorkflow(ctx, id, "", suite+" cleanup")
		cancel()
	}
	require.NoError(t, devenv.StopConductors(r.WorkRoot), "stop leftover conductors")
	left, err := RunProcesses(r.WorkRoot)
	require.NoError(t, err)
	require.Empty(t, left, "run processes outlived their conductors' groups")
	r.Client.Close()
	// Every stream the end-to-end suite makes must keep to the project's
	// own transition table (with the workers stopped, the files are whole).
	if suite == "e2e" {
		r.checkStreams()
	}
	if t.Failed() {
		r.dumpLogs()
	}
}

// T is the test the rig belongs to.
func (r *Rig) T() *testing.T { return r.t }

// Track has cleanup close a workflow the test started without the rig.
func (r *Rig) Track(workflowID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, workflowID)
}

// Started are the ids of the workflows the rig started or tracks.
func (r *Rig) Started() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started...)
}

// StartWorker starts a worker process (a new one each call) and returns it.
func (r *Rig) StartWorker() *devenv.Worker {
	r.t.Helper()
	sim, err := devenv.Binary("eddasim")
	require.NoError(r.t, err)
	templates, err := TemplatesDir()
	require.NoError(r.t, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers++
	w, err := devenv.StartWorker(devenv.WorkerOptions{
		Addr: r.Server.Addr, Namespace: r.Server.Namespace, TaskQueue: r.Queue, WorkRoot: r.WorkRoot, Conductor: sim,
		Sink: r.opts.Sink, SinkDir: r.SinkDir, KarviURL: r.opts.KarviURL, Env: r.env,
		LogPath:   filepath.Join(r.Dir, fmt.Sprintf("worker-%d.log", r.workers)),
		Templates: templates, Args: append(testWorkerArgs(), r.opts.WorkerArgs...),
	})
	require.NoError(r.t, err)
	r.worker = w
	return w
}

// testWorkerArgs come before a rig's own WorkerArgs, which can override
// them: a killed worker's deliveries move to the next one within 5 s, not
// the default minute, so the tests that kill workers again and again run
// in seconds. The default's own recovery is tested where it is named.
func testWorkerArgs() []string { return []string{"-tail-heartbeat", "5s"} }

// Worker is the current worker process, nil after KillWorker.
func (r *Rig) Worker() *devenv.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.worker
}

// KillWorker SIGKILLs the current worker, as a crash would. It is safe to
// call from another goroutine than the test's.
func (r *Rig) KillWorker() error {
	r.mu.Lock()
	w := r.worker
	r.worker = nil
	r.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Kill()
}

// WorkerLogs are the paths of the logs of every worker the rig started.
func (r *Rig) WorkerLogs() []string {
	r.t.Helper()
	logs, err := filepath.Glob(filepath.Join(r.Dir, "worker-*.log"))
	require.NoError(r.t, err)
	require.NotEmpty(r.t, logs)
	return logs
}

// dumpLogs shows the tail of every worker's and conductor's log.
func (r *Rig) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(r.Dir, "worker-*.log"))
	more, _ := filepath.Glob(filepath.Join(r.WorkRoot, "runs", "*", "*", "*.log"))
	for _, p := range append(logs, more...) {
		data, _ := os.ReadFile(p)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		r.t.Logf("==== %s\n%s", p, data)
	}
}

// checkStreams fails the test for every problem StreamProblems finds in
// the streams the rig's workers wrote (<work root>/events).
func (r *Rig) checkStreams() {
	problems, err := StreamProblems(filepath.Join(r.WorkRoot, "events"))
	if err != nil {
		r.t.Errorf("read the streams: %v", err)
		return
	}
	for _, p := range problems {
		r.t.Errorf("stream breaks the transition table: %s", p)
	}
	if len(problems) > 0 {
		files, _ := filepath.Glob(filepath.Join(r.WorkRoot, "events", "run-*.jsonl"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			r.t.Logf("==== %s\n%s", f, data)
		}
	}
}
