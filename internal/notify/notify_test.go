package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secret = "s3cret-for-tests"

var t0 = time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)

// receiver is a webhook receiver as docs/pauses.md tells one to write: it
// checks the signature, and skips a delivery id it has already processed.
type receiver struct {
	mu        sync.Mutex
	attempts  map[string][]string // delivery id -> attempt headers
	bodies    map[string][]string // delivery id -> bodies
	processed map[string]int      // delivery id -> times acted on
	order     []string
	badSig    int
	// answer decides the status of an attempt, after processing.
	answer func(id string, attempt int) int
}

func newReceiver(answer func(string, int) int) *receiver {
	return &receiver{attempts: map[string][]string{}, bodies: map[string][]string{}, processed: map[string]int{}, answer: answer}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := VerifyRequest([]byte(secret), body, r.Header, time.Now()); err != nil {
		rc.mu.Lock()
		rc.badSig++
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	id := r.Header.Get(HeaderDelivery)
	rc.mu.Lock()
	rc.attempts[id] = append(rc.attempts[id], r.Header.Get(HeaderAttempt))
	rc.bodies[id] = append(rc.bodies[id], string(body))
	if rc.processed[id] == 0 {
		rc.processed[id]++
		rc.order = append(rc.order, id)
	}
	n := len(rc.attempts[id])
	rc.mu.Unlock()
	w.WriteHeader(rc.answer(id, n))
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func config(t *testing.T, url string) Config {
	return Config{
		URL: url, Secret: secret, DeadLetter: filepath.Join(t.TempDir(), "dead", "notify.jsonl"),
		BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3, AttemptTimeout: 5 * time.Second,
	}
}

func event(i int) Event {
	reset := t0.Add(5 * time.Hour)
	return Event{Kind: KindPaused, Time: t0.Add(time.Duration(i) * time.Second), TaskID: fmt.Sprintf("T-%d", i),
		Reason: "usage limit", ResetAt: &reset, Details: map[string]any{"source": "sign:rate_limit_event"}}
}

func closeIn(t *testing.T, n *Notifier, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return n.Close(ctx)
}

func deadLetters(t *testing.T, path string) []DeadLetter {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	dl, err := ReadDeadLetters(data)
	require.NoError(t, err)
	return dl
}

// A receiver that fails every first try (after acting on it) sees each
// event's retry with the same id and body, and acts on each event once.
func TestDeliveredOnceDespiteRetries(t *testing.T) {
	rc := newReceiver(func(_ string, attempt int) int {
		if attempt == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	srv := serve(t, rc)
	cfg := config(t, srv.URL)
	n, err := New(cfg)
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, n.Notify(event(i)))
	}
	require.NoError(t, closeIn(t, n, 30*time.Second))

	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Zero(t, rc.badSig)
	require.Len(t, rc.processed, 5)
	for id, times := range rc.processed {
		assert.Equal(t, 1, times, id)
		assert.Equal(t, []string{"1", "2"}, rc.attempts[id], id)
		require.Len(t, rc.bodies[id], 2)
		assert.Equal(t, rc.bodies[id][0], rc.bodies[id][1], "a retry carries the same body")
		var ev Event
		require.NoError(t, json.Unmarshal([]byte(rc.bodies[id][0]), &ev))
		assert.Equal(t, id, ev.ID, "the body carries the header's id")
		assert.Equal(t, KindPaused, ev.Kind)
		assert.Equal(t, Version, ev.Version)
	}
	// in order
	for i, id := range rc.order {
		var ev Event
		require.NoError(t, json.Unmarshal([]byte(rc.bodies[id][0]), &ev))
		assert.Equal(t, fmt.Sprintf("T-%d", i), ev.TaskID)
	}
	assert.Equal(t, Stats{Queued: 5, Delivered: 5}, n.Stats())
	assert.Empty(t, deadLetters(t, cfg.DeadLetter))
}

// A receiver that never answers well loses nothing: every event is in the
// dead-letter file, each once, with why; a receiver that is not there at
// all, the same.
func TestDeadReceiverLosesNothing(t *testing.T) {
	failing := serve(t, newReceiver(func(string, int) int { return http.StatusBadGateway }))
	goneURL := "http://127.0.0.1:1/hook" // a privileged port nothing listens on
	refusing := serve(t, newReceiver(func(string, int) int { return http.StatusBadRequest }))

	for _, tc := range []struct {
		name, url, reason string
		attempts          int
	}{
		{"5xx", failing.URL, "receiver answered 502 Bad Gateway after 3 attempts", 3},
		{"no listener", goneURL, "send: ", 3},
		{"refused", refusing.URL, "receiver refused it: 400 Bad Request", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(t, tc.url)
			cfg.QueueSize = 4 // most of them find the queue full
			n, err := New(cfg)
			require.NoError(t, err)
			const total = 40
			for i := range total {
				require.NoError(t, n.Notify(event(i)))
			}
			require.NoError(t, closeIn(t, n, 30*time.Second))
			dl := deadLetters(t, cfg.DeadLetter)
			require.Len(t, dl, total)
			ids := map[string]bool{}
			for _, d := range dl {
				assert.False(t, ids[d.Delivery], "each event once")
				ids[d.Delivery] = true
				var ev Event
				require.NoError(t, json.Unmarshal(d.Event, &ev))
				assert.Equal(t, d.Delivery, ev.ID)
				ts := time.Now().Unix()
				assert.NoError(t, VerifySignature([]byte(secret), d.Event, strconv.FormatInt(ts, 10), Sign([]byte(secret), ts, d.Event), time.Now(), 0),
					"a dead letter is the body as it was signed")
				if d.Reason == "queue full" {
					assert.Zero(t, d.Attempts)
				} else {
					assert.Contains(t, d.Reason, tc.reason)
					assert.Equal(t, tc.attempts, d.Attempts)
				}
			}
			st := n.Stats()
			assert.Equal(t, int64(total), st.DeadLettered)
			assert.Equal(t, int64(total), st.Queued+st.Spilled)
			assert.Zero(t, st.Delivered)
			assert.Zero(t, st.Lost)
			info, err := os.Stat(cfg.DeadLetter)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		})
	}
}

// The caller never waits on a slow receiver: with the receiver stuck, a
// thousand Notify calls return; Close's deadline then dead-letters what
// was not sent, including the attempt in flight.
func TestCallerNeverWaitsOnSlowReceiver(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	cfg := config(t, srv.URL)
	cfg.QueueSize = 8
	cfg.AttemptTimeout = time.Hour
	n, err := New(cfg)
	require.NoError(t, err)

	const total = 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			_ = n.Notify(event(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a deadlock detector, not a timing check
		t.Fatal("Notify waited on the receiver")
	}
	err = closeIn(t, n, 50*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	unblock()
	st := n.Stats()
	assert.Equal(t, int64(total), st.Delivered+st.DeadLettered)
	assert.Zero(t, st.Lost)
	assert.Len(t, deadLetters(t, cfg.DeadLetter), int(st.DeadLettered))

	// After Close, an event still goes to the dead-letter file.
	assert.ErrorIs(t, n.Notify(event(total)), ErrClosed)
	assert.Len(t, deadLetters(t, cfg.DeadLetter), int(st.DeadLettered)+1)
	assert.NoError(t, closeIn(t, n, time.Second), "a second Close is a no-op")
}

func TestSecretsRedacted(t *testing.T) {
	rc := newReceiver(func(string, int) int { return http.StatusOK })
	srv := serve(t, rc)
	cfg := config(t, srv.URL)
	n, err := New(cfg)
	require.NoError(t, err)
	token := "ghp_" + strings.Repeat("aB3", 12)
	ev := Event{Kind: KindBlocked, Time: t0, TaskID: "T-1",
		Reason:  "git push failed: Authorization: Bearer Zq9abcdefghijklmnopqrstuv",
		Details: map[string]any{"api_key": "sk-live-123456789", "log": "cloning https://bob:hunter2pass@example.com/x.git with " + token}}
	require.NoError(t, n.Notify(ev))
	require.NoError(t, closeIn(t, n, 30*time.Second))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Len(t, rc.bodies, 1)
	for _, bodies := range rc.bodies {
		for _, secretText := range []string{"Zq9abcdefghijklmnopqrstuv", "sk-live-123456789", "hunter2pass", token} {
			assert.NotContains(t, bodies[0], secretText)
		}
		assert.Contains(t, bodies[0], "***REDACTED***")
		assert.Contains(t, bodies[0], `"T-1"`)
	}
	assert.Zero(t, rc.badSig, "the signature covers the redacted body")
}

func TestRetryAfterAndBackoffBounds(t *testing.T) {
	rc := newReceiver(func(_ string, attempt int) int {
		if attempt == 1 {
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600") // bounded by MaxBackoff
		rc.ServeHTTP(w, r)
	}))
	cfg := config(t, srv.URL)
	n, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, n.Notify(event(1)))
	require.NoError(t, closeIn(t, n, 30*time.Second))
	assert.Equal(t, int64(1), n.Stats().Delivered)

	assert.Equal(t, cfg.MaxBackoff, n.retryAfter("3600"))
	assert.Equal(t, time.Duration(0), n.retryAfter("soon"))
	assert.Equal(t, 2*time.Millisecond, n.retryAfter("0")+2*time.Millisecond)
	n.cfg.BaseBackoff, n.cfg.MaxBackoff = 100*time.Millisecond, 2*time.Second
	for attempt := 1; attempt <= 40; attempt++ {
		want := min(100*time.Millisecond<<min(attempt-1, 30), 2*time.Second)
		for range 20 {
			d := n.backoff(attempt)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
}

func TestSignature(t *testing.T) {
	body := []byte(`{"id":"ev-1","kind":"paused"}`)
	key := []byte(secret)
	at := t0.Unix()
	ts := strconv.FormatInt(at, 10)
	sig := Sign(key, at, body)
	assert.True(t, strings.HasPrefix(sig, "sha256="))
	assert.Len(t, sig, len("sha256=")+64)
	assert.NoError(t, VerifySignature(key, body, ts, sig, t0, 0))
	assert.NoError(t, VerifySignature(key, body, " "+ts+" ", " "+sig+" ", t0, 0))
	assert.NoError(t, VerifySignature(key, body, ts, sig, t0.Add(Tolerance), 0), "within the tolerance")
	assert.NoError(t, VerifySignature(key, body, ts, sig, t0.Add(-Tolerance), 0), "a receiver's clock a little behind")
	// What is signed is the timestamp, a dot and the body, as sent.
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts + "." + string(body)))
	assert.Equal(t, "sha256="+hex.EncodeToString(m.Sum(nil)), sig)

	assert.ErrorIs(t, VerifySignature(key, []byte(`{"id":"ev-1","kind":"resumed"}`), ts, sig, t0, 0), ErrBadSignature)
	assert.ErrorIs(t, VerifySignature([]byte("other"), body, ts, sig, t0, 0), ErrBadSignature)
	assert.ErrorIs(t, VerifySignature(key, body, ts, "", t0, 0), ErrNoSignature)
	assert.ErrorIs(t, VerifySignature(key, body, ts, strings.TrimPrefix(sig, "sha256="), t0, 0), ErrBadSignature)
	assert.ErrorIs(t, VerifySignature(key, body, ts, "sha256=zz", t0, 0), ErrBadSignature)
	assert.ErrorIs(t, VerifySignature(key, body, ts, sig[:len(sig)-2], t0, 0), ErrBadSignature)
	// The timestamp is signed: a fresh one on a captured signature fails.
	later := strconv.FormatInt(at+600, 10)
	assert.ErrorIs(t, VerifySignature(key, body, later, sig, t0.Add(10*time.Minute), 0), ErrBadSignature)
	assert.ErrorIs(t, VerifySignature(key, body, "", sig, t0, 0), ErrNoTimestamp)
	assert.ErrorIs(t, VerifySignature(key, body, "yesterday", sig, t0, 0), ErrNoTimestamp)
	// The signature is right, but too old, or too far ahead.
	assert.ErrorIs(t, VerifySignature(key, body, ts, sig, t0.Add(Tolerance+time.Second), 0), ErrStale)
	assert.ErrorIs(t, VerifySignature(key, body, ts, sig, t0.Add(-Tolerance-time.Second), 0), ErrStale)
	assert.ErrorIs(t, VerifySignature(key, body, ts, sig, t0.Add(2*time.Minute), time.Minute), ErrStale, "a tolerance of the receiver's")
}

// A delivery captured on the way (its body and headers, signature and
// all) and sent again later is refused by the check docs/pauses.md
// describes, while the delivery itself passes it.
func TestReplayedDeliveryIsRejected(t *testing.T) {
	type captured struct {
		body   []byte
		header http.Header
	}
	got := make(chan captured, 1)
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- captured{body, r.Header.Clone()}
		w.WriteHeader(http.StatusNoContent)
	}))
	n, err := New(config(t, srv.URL))
	require.NoError(t, err)
	require.NoError(t, n.Notify(event(1)))
	var c captured
	select {
	case c = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing delivered")
	}
	require.NoError(t, closeIn(t, n, 5*time.Second))

	ts, err := strconv.ParseInt(c.header.Get(HeaderTimestamp), 10, 64)
	require.NoError(t, err, "the timestamp header")
	sent := time.Unix(ts, 0)
	require.NoError(t, VerifyRequest([]byte(secret), c.body, c.header, sent.Add(time.Second)), "the delivery as received")
	require.ErrorIs(t, VerifyRequest([]byte(secret), c.body, c.header, sent.Add(Tolerance+time.Minute)), ErrStale,
		"the same delivery replayed later")
	c.header.Set(HeaderTimestamp, strconv.FormatInt(sent.Add(Tolerance+time.Minute).Unix(), 10))
	require.ErrorIs(t, VerifyRequest([]byte(secret), c.body, c.header, sent.Add(Tolerance+time.Minute)), ErrBadSignature,
		"replayed with its timestamp made fresh")
}

func TestDeliveryID(t *testing.T) {
	a, err := DeliveryID(event(1))
	require.NoError(t, err)
	b, _ := DeliveryID(event(1))
	c, _ := DeliveryID(event(2))
	assert.Equal(t, a, b, "the same event gets the same id")
	assert.NotEqual(t, a, c)
	assert.Regexp(t, `^ev-[0-9a-f]{32}$`, a)
	// the zone the time is given in does not change it
	e := event(1)
	e.Time = e.Time.In(time.FixedZone("X", 3600))
	d, _ := DeliveryID(e)
	assert.Equal(t, a, d)

	n, err := New(config(t, "http://127.0.0.1:1/"))
	require.NoError(t, err)
	defer closeIn(t, n, time.Second)
	it, err := n.prepare(event(1))
	require.NoError(t, err)
	assert.Equal(t, a, it.id)
	e = event(1)
	e.ID = "caller-chosen"
	it, err = n.prepare(e)
	require.NoError(t, err)
	assert.Equal(t, "caller-chosen", it.id)
}

func TestBadInput(t *testing.T) {
	good := Config{URL: "http://127.0.0.1:9/hook", Secret: "x", DeadLetter: filepath.Join(t.TempDir(), "d.jsonl")}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.URL = "" }, `URL "" is not an http(s) URL`},
		{func(c *Config) { c.URL = "ftp://x/y" }, `URL "ftp://x/y" is not an http(s) URL`},
		{func(c *Config) { c.URL = "http:///nohost" }, `is not an http(s) URL with a host`},
		{func(c *Config) { c.Secret = "" }, "Secret is empty"},
		{func(c *Config) { c.DeadLetter = "" }, "DeadLetter is empty"},
		{func(c *Config) { c.QueueSize = -1 }, "QueueSize is negative"},
		{func(c *Config) { c.MaxAttempts = -1 }, "MaxAttempts is negative"},
		{func(c *Config) { c.BaseBackoff, c.MaxBackoff = time.Second, time.Millisecond }, "MaxBackoff 1ms is below BaseBackoff 1s"},
	} {
		c := good
		tc.mut(&c)
		_, err := New(c)
		assert.ErrorContains(t, err, tc.want)
	}
	n, err := New(good)
	require.NoError(t, err)
	defer closeIn(t, n, time.Second)
	assert.ErrorContains(t, n.Notify(Event{Kind: "exploded", Time: t0}), `unknown event kind "exploded"`)
	assert.ErrorContains(t, n.Notify(Event{Kind: KindStalled}), "stalled event has no time")
	assert.ErrorContains(t, n.Notify(Event{Kind: KindRunEnded, Time: t0, Details: map[string]any{"f": func() {}}}), "run_ended event")
}

func TestDeadLetterWriteFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	cfg := config(t, "http://127.0.0.1:1/")
	cfg.DeadLetter = filepath.Join(dir, "dead.jsonl")
	cfg.MaxAttempts = 1
	n, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(cfg.DeadLetter, 0o755)) // a directory: the append fails
	require.NoError(t, n.Notify(event(1)))
	err = closeIn(t, n, 30*time.Second)
	assert.ErrorContains(t, err, "lost: dead-letter file")
	assert.Equal(t, int64(1), n.Stats().Lost)
}

func TestReadDeadLetters(t *testing.T) {
	good := `{"dead_at":"2026-03-10T14:00:00Z","reason":"queue full","attempts":0,"delivery":"ev-1","event":{"id":"ev-1"}}`
	dl, err := ReadDeadLetters([]byte(good + "\n\n" + good + "\n" + `{"dead_at":"2026-03`))
	require.NoError(t, err, "a torn last line is skipped")
	assert.Len(t, dl, 2)
	_, err = ReadDeadLetters([]byte(good + "\nnot json\n" + good + "\n"))
	assert.ErrorContains(t, err, "dead-letter line 2")
}
