package karvifake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"karvi-edda-temporal/internal/jsonmerge"
	"karvi-edda-temporal/internal/timescale"
)

// DefaultMaxBody is karvi's default request body limit (1 MiB).
const DefaultMaxBody = 1 << 20

// Options configures a Server.
type Options struct {
	// Addr to listen on; default "127.0.0.1:0". It must be a loopback IP.
	Addr string
	// Token is the admin token (KARVI_API_TOKEN). When Token,
	// OperatorToken and ViewerToken are all empty, auth is off.
	Token         string
	OperatorToken string
	ViewerToken   string
	// Now is the clock for the timestamps karvi writes (meta.updatedAt,
	// blocker.askedAt, history). Write.At always uses time.Now.
	Now func() time.Time
	// MaxBody bounds request bodies; default DefaultMaxBody.
	MaxBody int64
	// RateLimit is karvi's KARVI_RATE_LIMIT: requests a minute per client
	// address, a token bucket of that size refilled at RateLimit/60 a
	// second, 429 with Retry-After beyond it (/health is exempt). 0 is
	// karvi's default, DefaultRateLimit; RateLimitOff (negative) turns it off.
	RateLimit int
	// TimeScale makes the rate limit's minute last a minute at that scale
	// (internal/timescale): at 60 the bucket refills in a second, as a
	// worker at the same -time-scale expects. 0 or 1 is real time.
	TimeScale timescale.Scale
}

// DefaultRateLimit is karvi's default rate limit (requests a minute per
// client address); RateLimitOff is Options.RateLimit for none.
const (
	DefaultRateLimit = 120
	RateLimitOff     = -1
)

// Task is a task as a test sets it up and reads it back.
type Task struct {
	ID     string
	Title  string
	Status string
	// BriefPath gives the task a briefPath, so the brief routes serve it.
	BriefPath bool
	// Brief is the brief file's content (a JSON object). With BriefPath and
	// a nil Brief the file does not exist yet: GET/PATCH 404, PUT creates.
	Brief json.RawMessage
	// Blocker is task.blocker decoded tolerantly; BlockerRaw is exactly what
	// karvi holds (null when cleared).
	Blocker    *Blocker
	BlockerRaw json.RawMessage
	Result     json.RawMessage
	// Dispatch is task.dispatch; karvi's status routes never write it.
	Dispatch    json.RawMessage
	StartedAt   string
	CompletedAt string
	// History is task.history, one raw entry per accepted status write.
	History []json.RawMessage
	// Fields are more task fields as karvi keeps them (runtimeHint,
	// description, depends, assignee, skill, projectId, ...), rendered
	// with the task.
	Fields map[string]any
}

// Blocker is task.blocker.
type Blocker struct {
	Type    string
	Reason  string
	AskedAt string
}

// Write is one accepted write (brief PATCH/PUT, status, update).
type Write struct {
	Method string
	Path   string
	TaskID string
	Body   json.RawMessage
	// At is time.Now() when the request arrived, before any injected
	// latency, so event-to-PATCH latency can be measured against it.
	At time.Time
}

// Server is a running (or stopped) fake karvi. Its methods are safe for
// concurrent use.
type Server struct {
	opts    Options
	handler http.Handler

	lifeMu sync.Mutex // serialises Start, SetDown and Close
	addr   string     // host:port once started; reused on SetDown(false)
	srv    *http.Server
	served chan struct{}
	down   bool
	closed bool

	mu       sync.Mutex // guards everything below
	order    []string
	tasks    map[string]*task
	writes   []Write
	changed  chan struct{} // closed and replaced on every accepted write
	failN    int
	failCode int
	latency  time.Duration

	buckets   map[string]*bucket        // rate limit per client IP
	requests  int                       // requests counted by the rate limit
	refused   int                       // 429 answers
	routes    map[string]map[string]int // requests by task id ("" for all), then route
	conflicts []conflict                // injected version conflicts
	version   int                       // the board's _version, for the conflict text
	board     boardState                // what the live feed, projects and board routes add
}

// New returns a Server that is not listening yet; call Start.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = DefaultRateLimit
	}
	s := &Server{
		opts:    opts,
		tasks:   map[string]*task{},
		changed: make(chan struct{}),
		buckets: map[string]*bucket{},
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s
}

// Handler serves the fake's routes, for embedding in another server (an
// httptest.Server, say) instead of Start. Fault injection by SetDown needs
// Start.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Options.Addr and returns the base URL,
// http://127.0.0.1:PORT.
func (s *Server) Start() (string, error) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return "", errors.New("karvifake: server closed")
	}
	if s.srv != nil {
		return "", errors.New("karvifake: already started")
	}
	if err := checkLoopback(s.opts.Addr); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return "", fmt.Errorf("karvifake: listen on %s: %w", s.opts.Addr, err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s.URL(), nil
}

// URL is the base URL once started.
func (s *Server) URL() string {
	if s.addr == "" {
		return ""
	}
	return "http://" + s.addr
}

// Addr is host:port once started.
func (s *Server) Addr() string { return s.addr }

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	s.srv, s.served = srv, done
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns ErrServerClosed on SetDown/Close
	}()
}

// stop closes the listener and every open connection, idle or active, and
// waits for the accept loop to end.
func (s *Server) stop() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	<-s.served
	s.srv, s.served = nil, nil
}

// SetDown(true) closes the listener and all connections, so clients get a
// real connection refused (or reset, mid-request). SetDown(false) listens
// again on the same address. State and recorded writes are kept.
func (s *Server) SetDown(down bool) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return errors.New("karvifake: server closed")
	}
	if s.addr == "" {
		return errors.New("karvifake: SetDown before Start")
	}
	if down == s.down {
		return nil
	}
	if down {
		s.stop()
		s.down = true
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("karvifake: listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	s.down = false
	return nil
}

// Close stops the server for good.
func (s *Server) Close() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.stop()
	s.closed = true
}

// FailNext answers the next n write requests (PATCH, PUT, POST under
// /api/) with status and {"error":"injected failure"}, without applying or
// recording them.
func (s *Server) FailNext(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failN, s.failCode = n, status
}

// SetLatency delays every answer by d (0 turns it off).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// AddTask adds or replaces a task. Brief, when given, must be a JSON object
// and needs BriefPath.
func (s *Server) AddTask(t Task) error {
	if !idPattern.MatchString(t.ID) {
		return fmt.Errorf("karvifake: task id %q must match [A-Za-z0-9_-]+", t.ID)
	}
	nt := &task{id: t.ID, title: t.Title, status: t.Status, blocker: nil, fields: copyFields(t.Fields)}
	for _, h := range t.History {
		var v any
		if err := json.Unmarshal(h, &v); err != nil {
			return fmt.Errorf("karvifake: task %s history: %w", t.ID, err)
		}
		nt.history = append(nt.history, v)
	}
	if t.BriefPath {
		nt.briefPath = "briefs/" + t.ID + ".json"
	}
	if t.Brief != nil {
		if !t.BriefPath {
			return fmt.Errorf("karvifake: task %s has a Brief but no BriefPath", t.ID)
		}
		m, err := jsonmerge.DecodeObject(t.Brief)
		if err != nil {
			return fmt.Errorf("karvifake: task %s brief: %w", t.ID, err)
		}
		nt.brief = m
	}
	var err error
	if nt.blocker, err = decodeAny(t.BlockerRaw); err != nil {
		return fmt.Errorf("karvifake: task %s blocker: %w", t.ID, err)
	}
	if t.Blocker != nil && t.BlockerRaw == nil {
		nt.blocker = map[string]any{"reason": t.Blocker.Reason, "askedAt": t.Blocker.AskedAt}
	}
	if nt.result, err = decodeAny(t.Result); err != nil {
		return fmt.Errorf("karvifake: task %s result: %w", t.ID, err)
	}
	if nt.dispatch, err = decodeAny(t.Dispatch); err != nil {
		return fmt.Errorf("karvifake: task %s dispatch: %w", t.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; !ok {
		s.order = append(s.order, t.ID)
	}
	s.tasks[t.ID] = nt
	s.bumpLocked()
	return nil
}

// Task returns the task's current state, and whether it exists.
func (s *Server) Task(id string) (Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return Task{}, false
	}
	return t.export(), true
}

// Brief returns a copy of the task's brief, or nil when it has none.
func (s *Server) Brief(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.brief == nil {
		return nil
	}
	return jsonmerge.CloneObject(t.brief)
}

// Writes returns the accepted writes for task id in arrival order; an
// empty id returns every task's writes.
func (s *Server) Writes(id string) []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writesLocked(id)
}

func (s *Server) writesLocked(id string) []Write {
	var out []Write
	for _, w := range s.writes {
		if id == "" || w.TaskID == id {
			w.Body = append(json.RawMessage(nil), w.Body...)
			out = append(out, w)
		}
	}
	return out
}

// WaitWrites blocks until task id (every task, for "") has at least n
// accepted writes, and returns them; or returns ctx's error.
func (s *Server) WaitWrites(ctx context.Context, id string, n int) ([]Write, error) {
	for {
		s.mu.Lock()
		ws := s.writesLocked(id)
		ch := s.changed
		s.mu.Unlock()
		if len(ws) >= n {
			return ws, nil
		}
		select {
		case <-ctx.Done():
			return ws, fmt.Errorf("karvifake: waiting for %d writes to %q, have %d: %w", n, id, len(ws), ctx.Err())
		case <-ch:
		}
	}
}

// record appends an accepted write; the caller holds s.mu.
func (s *Server) record(w Write) {
	s.version++
	s.writes = append(s.writes, w)
	close(s.changed)
	s.changed = make(chan struct{})
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("karvifake: address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("karvifake: address %q: only a loopback IP such as 127.0.0.1 is allowed", addr)
	}
	return nil
}

func decodeAny(raw json.RawMessage) (any, error) {
	if raw == nil {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}
