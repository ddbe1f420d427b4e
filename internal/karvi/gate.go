package karvi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"karvi-edda-temporal/internal/timescale"
)

// DefaultRateLimit is karvi's default KARVI_RATE_LIMIT: 120 requests a
// minute per client address, a token bucket of 120 refilled at 2 a second.
// Beyond it karvi answers 429 with Retry-After.
const DefaultRateLimit = 120

// RateLimitOff turns the client's own limit off (karvi runs with
// KARVI_RATE_LIMIT=off).
const RateLimitOff = 0

// ParseRateLimit reads a rate limit setting as karvi's KARVI_RATE_LIMIT is
// written: "off" (or "0") for none, else requests per minute. Empty is
// karvi's default.
func ParseRateLimit(s string) (int, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "":
		return DefaultRateLimit, nil
	case "off", "0":
		return RateLimitOff, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("karvi rate limit %q: want off or a number of requests per minute", s)
	}
	return n, nil
}

// The client keeps under karvi's bucket with a margin: karvi counts a
// request when it arrives, the client when it leaves, and the two clocks
// drift by the network's jitter. A bucket a tenth smaller refilled 5%
// slower never runs ahead of karvi's.
const (
	burstShare = 0.9
	rateShare  = 0.95
)

// gate is everything the clients of one karvi address share within this
// process: the rate limiter, a pause karvi asked for with Retry-After, and
// the board snapshot concurrent readers share. One karvi counts requests per
// client address, so every client of that address must draw from one bucket.
type gate struct {
	perMinute atomic.Int64
	// scale is the time scale the minute of perMinute lasts at; set with
	// perMinute, under gatesMu.
	scale timescale.Scale
	lim   *rate.Limiter // nil when off

	mu          sync.Mutex
	pausedUntil time.Time
	// urgent counts waiters that go before brief writes (status writes and
	// board reads): a status write has a short deadline and must land; a
	// brief write that waits is merged with the next one anyway.
	urgent int

	refused atomic.Int64 // 429 answers seen
	sent    atomic.Int64 // requests sent

	// attending counts the tasks this process is running against this
	// karvi (Client.Attend): each will still need reservePerTask requests.
	attending atomic.Int64

	// pace is requests a second sent lately, decaying with demandTau;
	// paceAt is when it was last brought up to date. Under mu.
	pace   float64
	paceAt time.Time

	board boardCache
}

var (
	gatesMu sync.Mutex
	gates   = map[string]*gate{}
)

// gateFor returns the gate of baseURL, made on first use with perMinute
// requests a minute, the minute at the time scale scale; a later client
// asking for another limit changes it for all (the last setting wins: one
// process talks to one karvi with one setting).
func gateFor(baseURL string, perMinute int, scale timescale.Scale) *gate {
	if !scale.Scaled() {
		scale = timescale.One // 0 and 1 are one setting
	}
	gatesMu.Lock()
	defer gatesMu.Unlock()
	g, ok := gates[baseURL]
	if !ok {
		g = &gate{}
		gates[baseURL] = g
		g.configure(perMinute, scale)
		return g
	}
	if int(g.perMinute.Load()) != perMinute || g.scale != scale {
		g.configure(perMinute, scale)
	}
	return g
}

// configure sets the limit: a bucket of perMinute (less the margin),
// refilled over a minute at the time scale, so a scaled karvi's minute
// admits the same count as a real one's.
func (g *gate) configure(perMinute int, scale timescale.Scale) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.perMinute.Store(int64(perMinute))
	g.scale = scale
	if perMinute <= 0 {
		g.lim = nil
		return
	}
	burst := max(1, int(float64(perMinute)*burstShare))
	every := rate.Limit(float64(perMinute) / scale.Of(time.Minute).Seconds() * rateShare)
	g.lim = rate.NewLimiter(every, burst)
}

func (g *gate) limiter() *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lim
}

// wait blocks until a request may leave: after any pause karvi asked for,
// and within the rate limit. urgent requests (everything but brief writes)
// take the next token ahead of brief writes. A wait the context's deadline
// cannot cover fails at once with a transient error.
func (g *gate) wait(ctx context.Context, op string, urgent bool) error {
	if err := g.waitPause(ctx, op); err != nil {
		return err
	}
	lim := g.limiter()
	if lim == nil {
		return nil
	}
	if urgent {
		g.mu.Lock()
		g.urgent++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.urgent--
			g.mu.Unlock()
		}()
		if err := lim.Wait(ctx); err != nil {
			return &Error{Op: op, Kind: KindTransient, Message: "waiting for karvi's rate limit: " + err.Error(), Err: err}
		}
		return nil
	}
	// A brief write takes a token only when one is there and no urgent
	// request waits; else it sleeps about one refill and looks again (the
	// caller merges the brief updates that wait: Congested).
	step := time.Duration(float64(time.Second) / float64(lim.Limit()))
	for {
		g.mu.Lock()
		clear := g.urgent == 0
		g.mu.Unlock()
		if clear && lim.Allow() {
			return nil
		}
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Error{Op: op, Kind: KindTransient, Message: "waiting for karvi's rate limit: " + ctx.Err().Error(), Err: ctx.Err()}
		case <-t.C:
		}
		if err := g.waitPause(ctx, op); err != nil {
			return err
		}
	}
}

// waitPause sleeps out a Retry-After karvi gave.
func (g *gate) waitPause(ctx context.Context, op string) error {
	for {
		g.mu.Lock()
		d := time.Until(g.pausedUntil)
		g.mu.Unlock()
		if d <= 0 {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return &Error{Op: op, Kind: KindTransient, Message: fmt.Sprintf("karvi asked to wait %s (Retry-After), beyond this request's deadline", d.Round(time.Millisecond))}
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Error{Op: op, Kind: KindTransient, Message: "waiting for karvi's Retry-After: " + ctx.Err().Error(), Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// demandTau is how fast the pace of requests forgets; demandAhead how far
// ahead congested looks at that pace.
const (
	demandTau   = time.Second
	demandAhead = 3 * time.Second
)

// decayedPace is pace, measured at from, as it stands at now.
func decayedPace(pace float64, from, now time.Time) float64 {
	if from.IsZero() || !now.After(from) {
		return pace
	}
	return pace * math.Exp(-now.Sub(from).Seconds()/demandTau.Seconds())
}

// sentAt counts one request sent at now in the pace.
func (g *gate) sentAt(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pace = decayedPace(g.pace, g.paceAt, now) + 1/demandTau.Seconds()
	g.paceAt = now
}

// reservePerTask is what a short task running under congestion still
// needs of the bucket: its status writes (dispatched, in_progress, the
// final one with the dispatch result) and one brief write that carries
// everything its events made.
const reservePerTask = 4

// congested reports whether brief writes should be merged now: karvi asked
// to wait, a status write is queued, less than half of the bucket is left,
// or less than the tasks running against this karvi still need
// (reservePerTask each), or that much is left but the pace of requests
// lately would take it within a few seconds (many tasks starting at once,
// before they are all counted as running). Merging before the bucket is empty keeps tokens
// for the tasks that start later (their skeletons and statuses), and
// merging from the start when many tasks run at once keeps the first of
// them from spending the bucket on one PATCH per event while the others
// wait; a burst of events while the bucket is fuller than both still
// leaves one PATCH per event, as without a limit.
func (g *gate) congested() bool {
	now := time.Now()
	g.mu.Lock()
	paused := now.Before(g.pausedUntil)
	urgent := g.urgent > 0
	lim := g.lim
	pace := decayedPace(g.pace, g.paceAt, now)
	g.mu.Unlock()
	if paused || urgent {
		return true
	}
	if lim == nil {
		return false
	}
	return outpaced(lim.TokensAt(now), lim.Burst(), float64(lim.Limit()), pace, int(g.attending.Load()))
}

// outpaced reports whether brief writes should merge: the tokens left,
// less what the pace of requests lately (per second, above the refill)
// would take within demandAhead, fall below half the bucket or below
// what the tasks running still need.
func outpaced(tokens float64, burst int, refill, pace float64, attending int) bool {
	ahead := max(0, pace-refill) * demandAhead.Seconds()
	keep := max(1+float64(burst)/2, float64(reservePerTask*attending))
	return tokens-ahead < keep
}

// Attend counts a task as running against c's karvi until done is called
// (the tasks running make brief writes merge sooner: Congested). Calling
// done more than once counts once.
func (c *Client) Attend() (done func()) {
	g := c.gate
	g.attending.Add(1)
	var once sync.Once
	return func() { once.Do(func() { g.attending.Add(-1) }) }
}

type urgentKey struct{}

// Urgent marks ctx's brief writes as going before other brief writes, with
// the status writes: a task's skeleton, which its conductor waits for.
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func isUrgent(ctx context.Context) bool {
	v, _ := ctx.Value(urgentKey{}).(bool)
	return v
}

// pause holds every request to this karvi for d (its Retry-After), and
// empties the local bucket: karvi's is empty, and the two start again
// together.
func (g *gate) pause(d time.Duration) {
	g.refused.Add(1)
	now := time.Now()
	g.mu.Lock()
	if until := now.Add(d); until.After(g.pausedUntil) {
		g.pausedUntil = until
	}
	lim := g.lim
	g.mu.Unlock()
	if lim != nil {
		if n := int(lim.TokensAt(now)); n > 0 {
			lim.ReserveN(now, n)
		}
	}
}

// retryAfter reads a 429's Retry-After (seconds or an HTTP date); karvi
// sends whole seconds. Absent or unreadable, one second.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Second
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return time.Second
		}
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return time.Second
}

// maxRetryAfter bounds a pause karvi asks for; a proxy's odd header must
// not stall the worker for hours.
const maxRetryAfter = 5 * time.Minute

// Stats are this process's counts for one karvi address.
type Stats struct {
	// Sent is requests sent; Refused the 429 answers among them.
	Sent, Refused int64
	// BoardReads is full task list reads (GET /api/tasks) sent.
	BoardReads int64
}

// Stats returns the counts of every client of c's karvi in this process.
func (c *Client) Stats() Stats {
	g := c.gate
	return Stats{Sent: g.sent.Load(), Refused: g.refused.Load(), BoardReads: g.board.reads.Load()}
}

// Congested reports whether brief writes to c's karvi should be merged now
// (half the rate limit's bucket is used, or what the tasks running need of
// it (Attend), karvi asked to wait, or a status write is queued). Delivery
// merges brief updates while it is, and holds them until it is not.
func (c *Client) Congested() bool { return c.gate.congested() }
