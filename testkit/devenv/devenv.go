package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/proc"
)

// RepoRoot finds the module root by walking up to go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Binary returns the absolute path of a project binary built by `make
// build` (worker, starter, eddasim, karvifake), or of the temporal CLI. It
// is absolute because it is handed on: the worker runs its conductor in
// each task's directory, where a relative KARVI_EDDA_BIN names nothing.
func Binary(name string) (string, error) {
	var path string
	if name == "temporal" && os.Getenv("TEMPORAL_CLI") != "" {
		path = os.Getenv("TEMPORAL_CLI")
	} else if dir := os.Getenv("KARVI_EDDA_BIN"); dir != "" {
		path = filepath.Join(dir, name)
	} else {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not built (%v): run `make build temporal` (or `make test`, which does)", name, err)
	}
	return filepath.Abs(path)
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ServerOptions configures a dev server. A DBFile makes it persistent, so
// it can be restarted with its workflows intact.
type ServerOptions struct {
	DBFile string
	Port   int
	Log    io.Writer
	// ExtraArgs go to `temporal server start-dev` as they are, e.g.
	// "--dynamic-config-value", "KEY=VALUE".
	ExtraArgs []string
}

// Server is a running dev server, or an external Temporal server the
// suites were pointed at (External).
type Server struct {
	Addr string
	// Namespace is where the suites' workflows run: "default" on a dev
	// server, a namespace of the suite's own on an external server.
	Namespace string
	opts      ServerOptions
	dev       *testsuite.DevServer
	// restart is the external server's restart command (ExternalRestartEnv).
	restart  string
	external bool
}

// StartServer starts a dev server on 127.0.0.1 with the task workflow's
// search attributes registered, and waits until it serves.
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if o.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(o.Port), Namespace: DefaultNamespace, opts: o}
	return s, s.start(ctx)
}

func (s *Server) start(ctx context.Context) error {
	cli, err := Binary("temporal")
	if err != nil {
		return err
	}
	var attrs []temporal.SearchAttributeUpdate
	for _, name := range taskapi.SearchAttributeNames() {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(""))
	}
	out := s.opts.Log
	if out == nil {
		out = io.Discard
	}
	dev, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:     cli,
		ClientOptions:    &client.Options{HostPort: s.Addr, Logger: quiet{}},
		DBFilename:       s.opts.DBFile,
		LogLevel:         "error",
		SearchAttributes: temporal.NewSearchAttributes(attrs...),
		ExtraArgs:        s.opts.ExtraArgs,
		Stdout:           out,
		Stderr:           out,
	})
	if err != nil {
		return fmt.Errorf("start dev server on %s: %w", s.Addr, err)
	}
	s.dev = dev
	return nil
}

// Client dials the server, in the server's namespace.
func (s *Server) Client() (client.Client, error) {
	return client.Dial(client.Options{HostPort: s.Addr, Namespace: s.Namespace, Logger: quiet{}})
}

// Stop stops the server process; an external server is left running.
func (s *Server) Stop() error {
	if s.dev == nil {
		return nil
	}
	err := s.dev.Stop()
	s.dev = nil
	return err
}

// Restart stops the server and starts it again on the same port and
// database, as an operator restart would. An external server is restarted
// by its restart command (ExternalRestartEnv).
func (s *Server) Restart(ctx context.Context) error {
	if s.external {
		return s.restartExternal(ctx)
	}
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stop dev server: %w", err)
	}
	return s.start(ctx)
}

// WorkerOptions configures a worker process.
type WorkerOptions struct {
	Addr      string
	Namespace string // empty: the worker's default (TEMPORAL_NAMESPACE, else "default")
	TaskQueue string
	WorkRoot  string
	Conductor string
	Sink      string // file or karvi
	SinkDir   string
	KarviURL  string
	Templates string
	// Env is added to the worker's environment (and so the conductor's),
	// e.g. EDDASIM_SCENARIO, PATH with stub tools, KARVI_API_TOKEN.
	Env     []string
	LogPath string
	Args    []string
}

// Worker is a running worker process.
type Worker struct {
	Opts WorkerOptions
	cmd  *exec.Cmd
	done chan error
}

// StartWorker starts the worker binary. It dies with the test process
// (parent-death signal); the conductors it spawns are detached on purpose
// and must be stopped with StopConductors.
func StartWorker(o WorkerOptions) (*Worker, error) {
	bin, err := Binary("worker")
	if err != nil {
		return nil, err
	}
	if o.Sink == "" {
		o.Sink = "file"
	}
	if o.TaskQueue == "" {
		o.TaskQueue = taskapi.DefaultTaskQueue
	}
	args := []string{"-address", o.Addr, "-task-queue", o.TaskQueue, "-work-root", o.WorkRoot,
		"-conductor", o.Conductor, "-sink", o.Sink, "-stop-grace", "2s"}
	if o.Namespace != "" {
		args = append(args, "-namespace", o.Namespace)
	}
	if o.SinkDir != "" {
		args = append(args, "-sink-dir", o.SinkDir)
	}
	if o.KarviURL != "" {
		args = append(args, "-karvi-url", o.KarviURL)
	}
	if o.Templates != "" {
		args = append(args, "-templates", o.Templates)
	}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	// A developer's own temporal CLI profile (TLS, API key, a cloud
	// address) must not point test workers away from the local dev server.
	cmd.Env = append(append(os.Environ(), "TEMPORAL_CONFIG_FILE="+filepath.Join(os.TempDir(), "karvi-edda-no-profile.toml")), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if o.LogPath != "" {
		f, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	w := &Worker{Opts: o, cmd: cmd, done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait() }()
	return w, nil
}

// PID of the worker process.
func (w *Worker) PID() int { return w.cmd.Process.Pid }

// Kill SIGKILLs the worker, as a crash would, and reaps it.
func (w *Worker) Kill() error {
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-w.done
	return nil
}

// Stop asks the worker to stop (SIGTERM) and kills it after a grace.
func (w *Worker) Stop() error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		return nil
	case <-time.After(15 * time.Second):
		return w.Kill()
	}
}

// Run is one conductor run recorded under a work root: the run record the
// bridge writes at runs/<task>/<plan>/handle.json.
type Run struct {
	TaskID string
	Plan   string
	Handle proc.Handle
}

// Runs reads every conductor run record under a work root.
func Runs(workRoot string) ([]Run, error) {
	paths, err := filepath.Glob(filepath.Join(workRoot, "runs", "*", "*", "handle.json"))
	if err != nil {
		return nil, err
	}
	var runs []Run
	for _, p := range paths {
		plan := filepath.Dir(p)
		task := filepath.Dir(plan)
		h, err := ReadHandle(workRoot, filepath.Base(task), filepath.Base(plan))
		if err != nil {
			return nil, err
		}
		runs = append(runs, Run{TaskID: filepath.Base(task), Plan: filepath.Base(plan), Handle: h})
	}
	return runs, nil
}

// ReadHandle reads the run record of one task's plan.
func ReadHandle(workRoot, taskID, plan string) (proc.Handle, error) {
	p := filepath.Join(workRoot, "runs", taskID, plan, "handle.json")
	data, err := os.ReadFile(p)
	if err != nil {
		return proc.Handle{}, err
	}
	var h proc.Handle
	if err := json.Unmarshal(data, &h); err != nil {
		return proc.Handle{}, fmt.Errorf("%s: %w", p, err)
	}
	return h, nil
}

// Handles reads every conductor run record under a work root.
func Handles(workRoot string) ([]proc.Handle, error) {
	runs, err := Runs(workRoot)
	if err != nil {
		return nil, err
	}
	hs := make([]proc.Handle, len(runs))
	for i, r := range runs {
		hs[i] = r.Handle
	}
	return hs, nil
}

// StopConductors stops every conductor recorded under a work root: tests
// call it on cleanup so that no detached conductor outlives them.
func StopConductors(workRoot string) error {
	hs, err := Handles(workRoot)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, h := range hs {
		if err := proc.Stop(ctx, h, time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// quiet drops the SDK client's log lines: the processes' own logs are what
// a failing test shows.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
