package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"karvi-edda-temporal/mapping/redact"
)

// Kind is what happened.
type Kind string

// The kinds of events.
const (
	KindPaused   Kind = "paused"    // a task paused (a usage limit, a budget)
	KindResumed  Kind = "resumed"   // a paused task runs again
	KindStalled  Kind = "stalled"   // a task shows no progress
	KindBlocked  Kind = "blocked"   // a task needs a person
	KindHostLost Kind = "host_lost" // a worker host stopped answering
	KindRunEnded Kind = "run_ended" // a run of tasks ended
)

var kinds = map[Kind]bool{KindPaused: true, KindResumed: true, KindStalled: true, KindBlocked: true, KindHostLost: true, KindRunEnded: true}

// Version is the body's format version ("version" in the JSON).
const Version = 1

// Event is one notification. Kind and Time are required; the rest is
// whatever the event has.
type Event struct {
	// ID is the delivery id. Leave it empty to have it derived from the
	// event's content (the same content gives the same id).
	ID      string     `json:"id"`
	Version int        `json:"version"`
	Kind    Kind       `json:"kind"`
	Time    time.Time  `json:"time"`
	TaskID  string     `json:"task_id,omitempty"`
	RunID   string     `json:"run_id,omitempty"`
	Host    string     `json:"host,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Details holds anything else, as JSON values.
	Details map[string]any `json:"details,omitempty"`
}

// Config sets up a Notifier. URL, Secret and DeadLetter are required; the
// rest has defaults.
type Config struct {
	URL    string // http or https
	Secret string // the HMAC key receivers share
	// DeadLetter is the JSONL file that keeps what could not be delivered.
	DeadLetter string
	// QueueSize bounds the events waiting to be sent (default 256).
	QueueSize int
	// MaxAttempts bounds the attempts per event (default 6).
	MaxAttempts int
	// AttemptTimeout bounds one attempt (default 10 s).
	AttemptTimeout time.Duration
	// BaseBackoff is the wait after the first failed attempt, doubled after
	// each next one (default 500 ms); MaxBackoff bounds it (default 30 s).
	// Each wait is jittered to between half and all of it.
	BaseBackoff, MaxBackoff time.Duration
	// Client sends the requests (default: a client that does not follow
	// redirects).
	Client *http.Client
	// Redactor masks secrets in events (default: mapping/redact's rules).
	Redactor *redact.Redactor
	// Logger gets one line per dead letter and per lost event (default: none).
	Logger *slog.Logger
}

func (c *Config) check() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("notify: URL %q is not an http(s) URL with a host", c.URL)
	}
	if c.Secret == "" {
		return errors.New("notify: Secret is empty: receivers could not check the signature")
	}
	if c.DeadLetter == "" {
		return errors.New("notify: DeadLetter is empty: undeliverable events would be lost")
	}
	for name, v := range map[string]int64{"QueueSize": int64(c.QueueSize), "MaxAttempts": int64(c.MaxAttempts),
		"AttemptTimeout": int64(c.AttemptTimeout), "BaseBackoff": int64(c.BaseBackoff), "MaxBackoff": int64(c.MaxBackoff)} {
		if v < 0 {
			return fmt.Errorf("notify: %s is negative", name)
		}
	}
	if c.QueueSize == 0 {
		c.QueueSize = 256
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 6
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.BaseBackoff == 0 {
		c.BaseBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxBackoff < c.BaseBackoff {
		return fmt.Errorf("notify: MaxBackoff %v is below BaseBackoff %v", c.MaxBackoff, c.BaseBackoff)
	}
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Stats counts what happened to events so far.
type Stats struct {
	Queued, Delivered, DeadLettered, Spilled, Lost int64
}

// ErrClosed is returned by Notify after Close; the event went to the
// dead-letter file.
var ErrClosed = errors.New("notify: notifier closed; the event was dead-lettered")

// item is a checked, redacted event ready to send.
type item struct {
	id, kind string
	body     []byte
}

// Notifier sends events. Its methods are safe for concurrent use.
type Notifier struct {
	cfg    Config
	secret []byte

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
	queue  chan item

	dead     chan deadLetter
	fileMu   sync.Mutex // one dead-letter write at a time
	ctx      context.Context
	cancel   context.CancelFunc
	sendDone chan struct{}
	deadDone chan struct{}

	queued, delivered, deadLettered, spilled, lost atomic.Int64
	deadErr                                        atomic.Pointer[error]
}

// New checks the config and starts the goroutines; Close stops them.
func New(cfg Config) (*Notifier, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.DeadLetter), 0o755); err != nil {
		return nil, fmt.Errorf("notify: dead-letter directory: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{
		cfg:      cfg,
		secret:   []byte(cfg.Secret),
		queue:    make(chan item, cfg.QueueSize),
		dead:     make(chan deadLetter, cfg.QueueSize),
		ctx:      ctx,
		cancel:   cancel,
		sendDone: make(chan struct{}),
		deadDone: make(chan struct{}),
	}
	go n.sendLoop()
	go n.deadLoop()
	return n, nil
}

// Notify checks and queues one event and returns at once. An event with an
// unknown kind or no time is refused with an error and goes nowhere. When
// the queue is full the event goes to the dead-letter file instead (reason
// "queue full"), and after Close too (ErrClosed): it is never dropped.
func (n *Notifier) Notify(ev Event) error {
	it, err := n.prepare(ev)
	if err != nil {
		return err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.spill(it, "notifier closed")
		return ErrClosed
	}
	select {
	case n.queue <- it:
		n.queued.Add(1)
	default:
		n.spill(it, "queue full")
	}
	return nil
}

func (n *Notifier) prepare(ev Event) (item, error) {
	if !kinds[ev.Kind] {
		return item{}, fmt.Errorf("notify: unknown event kind %q (want paused, resumed, stalled, blocked, host_lost or run_ended)", ev.Kind)
	}
	if ev.Time.IsZero() {
		return item{}, fmt.Errorf("notify: %s event has no time", ev.Kind)
	}
	ev.Version = Version
	ev.Time = ev.Time.UTC()
	if ev.ResetAt != nil {
		r := ev.ResetAt.UTC()
		ev.ResetAt = &r
	}
	if ev.ID == "" {
		id, err := DeliveryID(ev)
		if err != nil {
			return item{}, err
		}
		ev.ID = id
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return item{}, fmt.Errorf("notify: %s event: %w", ev.Kind, err)
	}
	return item{id: ev.ID, kind: string(ev.Kind), body: n.cfg.Redactor.JSON(raw)}, nil
}

// DeliveryID is the id an event without one gets: "ev-" and 32 hex digits of
// the SHA-256 of its JSON without the id. It is short enough that redaction
// never mistakes it for a secret.
func DeliveryID(ev Event) (string, error) {
	ev.ID = ""
	ev.Version = Version
	ev.Time = ev.Time.UTC()
	raw, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("notify: %s event: %w", ev.Kind, err)
	}
	sum := sha256.Sum256(raw)
	return "ev-" + hex.EncodeToString(sum[:16]), nil
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	return Stats{Queued: n.queued.Load(), Delivered: n.delivered.Load(), DeadLettered: n.deadLettered.Load(),
		Spilled: n.spilled.Load(), Lost: n.lost.Load()}
}

// Close stops taking events and sends what is queued until ctx ends; what is
// still queued then, and the attempt in flight, go to the dead-letter file.
// It returns ctx's error if the deadline cut the flush short, or the first
// dead-letter write error (an event lost), else nil. Calling it again is a
// no-op returning nil.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.queue)
	n.mu.Unlock()

	var err error
	select {
	case <-n.sendDone:
	case <-ctx.Done():
		err = fmt.Errorf("notify: close: %w; undelivered events were dead-lettered", ctx.Err())
		n.cancel()
		<-n.sendDone
	}
	n.cancel()
	close(n.dead)
	<-n.deadDone
	if p := n.deadErr.Load(); p != nil {
		err = errors.Join(err, *p)
	}
	return err
}

func (n *Notifier) sendLoop() {
	defer close(n.sendDone)
	for it := range n.queue {
		if n.ctx.Err() != nil {
			n.toDead(it, 0, "notifier closed before delivery")
			continue
		}
		attempts, reason, ok := n.deliver(it)
		if ok {
			n.delivered.Add(1)
			continue
		}
		n.toDead(it, attempts, reason)
	}
}

// deliver tries one event until it is delivered, refused, or out of
// attempts; reason says why it failed.
func (n *Notifier) deliver(it item) (attempts int, reason string, ok bool) {
	for attempt := 1; ; attempt++ {
		wait, retry, why := n.attempt(it, attempt)
		if why == "" {
			return attempt, "", true
		}
		if !retry {
			return attempt, why, false
		}
		if attempt >= n.cfg.MaxAttempts {
			return attempt, fmt.Sprintf("%s after %d attempts", why, attempt), false
		}
		if wait <= 0 {
			wait = n.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-n.ctx.Done():
			t.Stop()
			return attempt, why + "; notifier closed before the next attempt", false
		}
	}
}

// attempt sends once. why is empty on success; retry says whether another
// attempt may help; wait is the receiver's Retry-After, bounded.
func (n *Notifier) attempt(it item, attempt int) (wait time.Duration, retry bool, why string) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(it.body))
	if err != nil {
		return 0, false, "request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "karvi-edda-temporal-notify/1")
	// Signed as it leaves, so that a retry after a long backoff is as
	// fresh as a first attempt for the receiver's tolerance.
	ts := time.Now().Unix()
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(n.secret, ts, it.body))
	req.Header.Set(HeaderDelivery, it.id)
	req.Header.Set(HeaderEvent, it.kind)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return 0, true, "send: " + redact.String(err.Error())
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return 0, false, ""
	case c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable:
		return n.retryAfter(resp.Header.Get("Retry-After")), true, "receiver answered " + resp.Status
	case c == http.StatusRequestTimeout || c >= 500:
		return 0, true, "receiver answered " + resp.Status
	default:
		return 0, false, "receiver refused it: " + resp.Status
	}
}

func (n *Notifier) retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), n.cfg.MaxBackoff)
}

// backoff is BaseBackoff doubled per failed attempt, bounded by MaxBackoff,
// jittered to between half and all of it.
func (n *Notifier) backoff(attempt int) time.Duration {
	d := n.cfg.BaseBackoff
	for i := 1; i < attempt && d < n.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, n.cfg.MaxBackoff)
	half := d / 2
	return half + rand.N(d-half+1)
}
