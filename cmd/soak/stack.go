package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/internal/notify"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/soak"
	"karvi-edda-temporal/soak/observe"
	"karvi-edda-temporal/testkit/devenv"
	"karvi-edda-temporal/testkit/karvifake"
)

// notifySecret signs the workers' webhook deliveries to the soak's
// receiver; it is the soak's own, used nowhere else.
const notifySecret = "soak-webhook-secret"

// stack is everything a soak starts: the dev server, the karvi fake, the
// webhook receiver and the worker hosts, with the journal of what the
// driver did to them.
type stack struct {
	cfg     config
	log     *log.Logger
	journal *observe.Journal
	server  *devenv.Server
	// serverPID is the dev server's process, found after each start so
	// the end can prove it gone.
	serverPID int
	cl        client.Client
	karvi     *karvifake.Server
	hooks     *hookReceiver
	sim       string

	mu    sync.Mutex
	hosts map[string]*host
	kills int
}

// host is one worker host: its name, work root and current process.
type host struct {
	name     string
	dir      string
	workRoot string
	opts     devenv.WorkerOptions
	worker   *devenv.Worker
	pids     []int // every worker process it ran
}

// record appends to the journal; a journal that cannot be written is
// logged, never fatal: the soak goes on and the checks see less.
func (s *stack) record(r soak.Record) {
	if err := s.journal.Append(r); err != nil {
		s.log.Printf("journal: %v", err)
	}
}

func (s *stack) logf(format string, args ...any) { s.log.Printf(format, args...) }

// startStack starts every process of the soak under cfg.out.
func startStack(ctx context.Context, cfg config) (*stack, error) {
	if err := os.RemoveAll(cfg.out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(cfg.out, "driver.log"))
	if err != nil {
		return nil, err
	}
	s := &stack{cfg: cfg, log: log.New(logf, "", log.Ltime|log.Lmicroseconds), hosts: map[string]*host{}}
	if s.journal, err = observe.OpenJournal(filepath.Join(cfg.out, "journal.jsonl")); err != nil {
		return nil, err
	}
	if s.sim, err = devenv.Binary("eddasim"); err != nil {
		return nil, err
	}
	if _, err := devenv.Binary("worker"); err != nil {
		return nil, err
	}
	tlog, err := os.Create(filepath.Join(cfg.out, "temporal.log"))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	s.server, err = devenv.StartServer(sctx, devenv.ServerOptions{DBFile: filepath.Join(cfg.out, "temporal.db"), Log: tlog})
	if err != nil {
		return s, err
	}
	s.findServerPID()
	if s.cl, err = s.server.Client(); err != nil {
		return s, err
	}
	s.logf("dev server on %s (pid %d)", s.server.Addr, s.serverPID)

	// karvi's default rate limit: every worker and the intake share its
	// bucket (one client address, 127.0.0.1). Its minute is the scaled
	// minute, as the workers' limiter's is.
	s.karvi = karvifake.New(karvifake.Options{RateLimit: karvifake.DefaultRateLimit, TimeScale: timescale.Scale(cfg.scale)})
	kurl, err := s.karvi.Start()
	if err != nil {
		return s, err
	}
	s.logf("karvi fake on %s", kurl)
	if s.hooks, err = startHooks(filepath.Join(cfg.out, "webhooks.jsonl")); err != nil {
		return s, err
	}
	for _, name := range soak.Hosts {
		h := &host{name: name, dir: filepath.Join(cfg.out, name)}
		h.workRoot = filepath.Join(h.dir, "work")
		if err := os.MkdirAll(h.workRoot, 0o755); err != nil {
			return s, err
		}
		h.opts = devenv.WorkerOptions{
			Addr: s.server.Addr, WorkRoot: h.workRoot, Conductor: s.sim,
			Sink: "karvi", KarviURL: kurl, LogPath: filepath.Join(h.dir, "worker.log"),
			Env: []string{
				timescale.Env + "=" + strconv.FormatFloat(cfg.scale, 'g', -1, 64),
				"KARVI_EDDA_NOTIFY_SECRET=" + notifySecret,
			},
			Args: []string{"-host", name, "-notify-url", s.hooks.url,
				// Two workers on one machine are one client to karvi:
				// they split its limit, as docs say an operator does.
				"-karvi-rate-limit", strconv.Itoa(karvifake.DefaultRateLimit / len(soak.Hosts)),
				"-notify-dead-letter", filepath.Join(h.dir, "notify-dead-letter.jsonl"),
				// Both hosts follow karvi's board: they join one intake.
				"-intake-karvi"},
		}
		s.hosts[name] = h
		if err := s.startWorker(name); err != nil {
			return s, err
		}
	}
	return s, nil
}

// findServerPID finds the dev server's process by its port, for the end's
// check that nothing is left running.
func (s *stack) findServerPID() {
	_, port, _ := net.SplitHostPort(s.server.Addr)
	pid, err := findProcess(func(args []string) bool {
		return contains(args, "start-dev") && contains(args, port)
	})
	if err != nil {
		s.logf("dev server pid: %v", err)
		return
	}
	s.serverPID = pid
}

// startWorker starts (or starts again) a host's worker.
func (s *stack) startWorker(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[name]
	if h.worker != nil {
		return nil
	}
	w, err := devenv.StartWorker(h.opts)
	if err != nil {
		return fmt.Errorf("start worker %s: %w", name, err)
	}
	h.worker = w
	h.pids = append(h.pids, w.PID())
	s.record(soak.Record{Kind: soak.RecWorkerStart, Details: map[string]string{"host": name, "pid": strconv.Itoa(w.PID())}})
	s.logf("worker %s started (pid %d)", name, w.PID())
	return nil
}

// supervise restarts a worker that exited by itself (one that started
// while the Temporal server was restarting gives up at once, as a
// worker does), until ctx ends: the soak kills workers on purpose only.
func (s *stack) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		s.mu.Lock()
		var exited []string
		for _, name := range soak.Hosts {
			if h := s.hosts[name]; h.worker != nil && !alive(h.worker.PID()) {
				s.logf("worker %s (pid %d) exited by itself; starting it again", name, h.worker.PID())
				s.record(soak.Record{Kind: soak.RecNote, Details: map[string]string{"host": name, "pid": strconv.Itoa(h.worker.PID()), "worker": "exited by itself"}})
				h.worker = nil
				exited = append(exited, name)
			}
		}
		s.mu.Unlock()
		for _, name := range exited {
			if err := s.startWorker(name); err != nil {
				s.logf("%v", err)
			}
		}
	}
}

// killWorker SIGKILLs a host's worker, as a crash would.
func (s *stack) killWorker(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[name]
	if h.worker == nil {
		return fmt.Errorf("worker %s is not running", name)
	}
	pid := h.worker.PID()
	if err := h.worker.Kill(); err != nil {
		return fmt.Errorf("kill worker %s: %w", name, err)
	}
	h.worker = nil
	s.kills++
	s.record(soak.Record{Kind: soak.RecWorkerKill, Details: map[string]string{"host": name, "pid": strconv.Itoa(pid)}})
	s.logf("worker %s killed (pid %d)", name, pid)
	return nil
}

// stopWorkers stops every worker (SIGTERM, then SIGKILL after a grace).
func (s *stack) stopWorkers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range soak.Hosts {
		h := s.hosts[name]
		if h == nil || h.worker == nil {
			continue
		}
		if err := h.worker.Stop(); err != nil {
			s.logf("stop worker %s: %v", name, err)
		}
		h.worker = nil
	}
}

// close stops whatever is still running, each by its own handle.
func (s *stack) close() {
	s.stopWorkers()
	for _, h := range s.hosts {
		if err := devenv.StopConductors(h.workRoot); err != nil {
			s.logf("stop conductors of %s: %v", h.name, err)
		}
	}
	if s.hooks != nil {
		s.hooks.close()
	}
	if s.karvi != nil {
		s.karvi.Close()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	if s.server != nil {
		if err := s.server.Stop(); err != nil {
			s.logf("stop dev server: %v", err)
		}
	}
	if s.journal != nil {
		_ = s.journal.Close()
	}
}

// hookReceiver is the webhook receiver the workers notify: it checks each
// delivery's signature and appends one JSON line per delivery (retries
// included, marked) to its file.
type hookReceiver struct {
	url  string
	srv  *http.Server
	done chan struct{}
	mu   sync.Mutex
	f    *os.File
}

// hookLine is one delivery as the receiver writes it: what the soak's
// checks read (soak/observe.ReadWebhooks: the id, the body and its
// digest), and what a person reading the file wants besides.
type hookLine struct {
	At   time.Time `json:"at"`
	ID   string    `json:"id"`
	Kind string    `json:"kind,omitempty"`
	Task string    `json:"task,omitempty"`
	Run  string    `json:"run,omitempty"`
	// Attempt is the sender's attempt header: a retry repeats the id and
	// the body on purpose.
	Attempt  string `json:"attempt,omitempty"`
	Verified bool   `json:"verified"`
	// Digest is the body's SHA-256: a redelivery carries the same body,
	// a repeated id with another body is a different event.
	Digest string          `json:"digest"`
	Body   json.RawMessage `json:"body,omitempty"`
}

func startHooks(path string) (*hookReceiver, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	h := &hookReceiver{url: "http://" + ln.Addr().String() + "/hook", f: f, done: make(chan struct{})}
	h.srv = &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(h.done)
		_ = h.srv.Serve(ln)
	}()
	return h, nil
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var ev notify.Event
	_ = json.Unmarshal(body, &ev)
	sum := sha256.Sum256(body)
	line := hookLine{
		At: time.Now(), ID: r.Header.Get(notify.HeaderDelivery), Kind: string(ev.Kind), Task: ev.TaskID, Run: ev.RunID,
		Attempt:  r.Header.Get(notify.HeaderAttempt),
		Verified: notify.VerifyRequest([]byte(notifySecret), body, r.Header, time.Now()) == nil,
		Digest:   hex.EncodeToString(sum[:]), Body: json.RawMessage(body),
	}
	if line.ID == "" {
		line.ID = ev.ID
	}
	if !json.Valid(body) {
		line.Body = nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out, _ := json.Marshal(line)
	if h.f != nil {
		_, _ = h.f.Write(append(out, '\n'))
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil {
		_ = h.f.Close()
		h.f = nil
	}
}

// findProcess finds the one process whose command line matches.
func findProcess(match func(args []string) bool) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) > 0 && match(args) {
			return pid, nil
		}
	}
	return 0, errors.New("no such process")
}

// cmdline is a process's arguments, nil when it is gone.
func cmdline(pid int) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(data) == 0 {
		return nil
	}
	var args []string
	start := 0
	for i, b := range data {
		if b == 0 {
			args = append(args, string(data[start:i]))
			start = i + 1
		}
	}
	return args
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
