package karvi

import (
	"reflect"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		status int
		msg    string
		want   Kind
	}{
		{404, "no brief for this task", KindNoBrief},
		{404, "Task T5 not found", KindNotFound},
		{404, "Not found", KindNotFound},
		{400, "Invalid task status transition: approved -> in_progress", KindIllegalTransition},
		{400, "Invalid status. Must be one of: pending", KindBadRequest},
		{400, "Invalid JSON body", KindBadRequest},
		{401, "unauthorized", KindUnauthorized},
		{403, "forbidden", KindUnauthorized},
		{408, "", KindTransient},
		{413, "Payload too large", KindBadRequest},
		{429, "rate_limit_exceeded", KindTransient},
		{500, "boom", KindTransient},
		{502, "", KindTransient},
		{503, "injected failure", KindTransient},
		{504, "", KindTransient},
		{409, "", KindBadRequest},
		{302, "", KindBadRequest},
	}
	for _, c := range cases {
		if got := classify(c.status, c.msg); got != c.want {
			t.Errorf("classify(%d, %q) = %s, want %s", c.status, c.msg, got, c.want)
		}
	}
}

func TestPathTo(t *testing.T) {
	cases := []struct {
		from, to string
		want     []string
		illegal  bool
	}{
		{"dispatched", "dispatched", nil, false},
		{"dispatched", "in_progress", []string{"in_progress"}, false},
		{"dispatched", "completed", []string{"in_progress", "completed"}, false},
		{"pending", "completed", []string{"dispatched", "in_progress", "completed"}, false},
		{"", "in_progress", []string{"dispatched", "in_progress"}, false},
		{"dispatched", "blocked", []string{"in_progress", "blocked"}, false},
		{"blocked", "dispatched", []string{"dispatched"}, false},
		{"blocked", "completed", []string{"in_progress", "completed"}, false},
		{"in_progress", "dispatched", []string{"dispatched"}, false},
		{"needs_revision", "completed", []string{"in_progress", "completed"}, false},
		{"completed", "approved", []string{"approved"}, false},
		// A redispatch of a finished task goes through needs_revision.
		{"completed", "dispatched", []string{"needs_revision", "in_progress", "dispatched"}, false},
		{"reviewing", "dispatched", []string{"needs_revision", "in_progress", "dispatched"}, false},
		// Otherwise no path through review states or out of terminal ones.
		{"completed", "in_progress", nil, true},
		{"completed", "blocked", nil, true},
		{"reviewing", "in_progress", nil, true},
		{"approved", "in_progress", nil, true},
		{"approved", "dispatched", nil, true},
		{"cancelled", "dispatched", nil, true},
		{"dispatched", "bogus", nil, true},
		{"bogus", "dispatched", nil, true},
	}
	for _, c := range cases {
		got, err := PathTo(c.from, c.to)
		if c.illegal {
			if !IsIllegalTransition(err) || IsRetryable(err) {
				t.Errorf("PathTo(%q, %q) err = %v, want a non-retryable illegal transition", c.from, c.to, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("PathTo(%q, %q) = %v, %v; want %v", c.from, c.to, got, err, c.want)
		}
		// Every step of a planned path is legal in karvi's table.
		prev := c.from
		for _, s := range got {
			if !CanTransition(prev, s) {
				t.Errorf("PathTo(%q, %q) step %s -> %s is illegal", c.from, c.to, prev, s)
			}
			prev = s
		}
	}
}

func TestIllegalTransitionErrorWording(t *testing.T) {
	e := IllegalTransitionError("op", "", "completed")
	if e.Message != "Invalid task status transition: pending -> completed" || e.Kind != KindIllegalTransition {
		t.Fatalf("got %+v", e)
	}
}

func TestErrorText(t *testing.T) {
	cases := map[string]string{
		`{"error":"no brief for this task"}`:                         "no brief for this task",
		`{"error":"payload_too_large","message":"Body exceeds 1KB"}`: "payload_too_large (Body exceeds 1KB)",
		`{"error":{"code":1}}`:                                       `{"code":1}`,
		`Not found`:                                                  "Not found",
		`  <html>bad gateway</html> `:                                "<html>bad gateway</html>",
	}
	for in, want := range cases {
		if got := errorText([]byte(in)); got != want {
			t.Errorf("errorText(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestIsJSONObject(t *testing.T) {
	cases := map[string]bool{
		`{}`: true, ` {"a":[1,2]} `: true, "\n\t{\"log\":[]}": true,
		`[]`: false, `null`: false, `"x"`: false, `1`: false, ``: false, `   `: false,
		`{"a":1`: false, `{"a":1} {"b":2}`: false, `{"a":1}x`: false,
	}
	for in, want := range cases {
		if got := isJSONObject([]byte(in)); got != want {
			t.Errorf("isJSONObject(%q) = %v, want %v", in, got, want)
		}
	}
}

// outpaced: half the bucket, the tasks running, and the pace of requests
// each make brief writes merge; the refill's own pace does not.
func TestOutpaced(t *testing.T) {
	cases := []struct {
		name                 string
		tokens, refill, pace float64
		attending            int
		want                 bool
	}{
		{"full bucket, idle", 108, 1.9, 0, 1, false},
		{"half the bucket used", 54, 1.9, 0, 1, true},
		{"one task's events at a walking pace", 100, 1.9, 1.5, 1, false},
		{"one task's burst of events", 100, 1.9, 8, 1, false},
		{"the tasks running need more than is left", 100, 1.9, 0, 30, true},
		{"many tasks starting at once", 90, 1.9, 20, 8, true},
	}
	for _, c := range cases {
		if got := outpaced(c.tokens, 108, c.refill, c.pace, c.attending); got != c.want {
			t.Errorf("%s: outpaced = %v, want %v", c.name, got, c.want)
		}
	}
}

// At time scale 60 a minute lasts a second: the limiter admits a minute's
// quota of karvi's default limit within one second (of a fake clock), and
// at scale 1 it keeps to the minute.
func TestRateLimitAtTheTimeScale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// admitted counts the requests the limiter lets through when n come
	// evenly within d.
	admitted := func(g *gate, n int, d time.Duration) int {
		ok := 0
		for i := range n {
			if g.lim.AllowN(t0.Add(d*time.Duration(i)/time.Duration(n)), 1) {
				ok++
			}
		}
		return ok
	}
	scaled := &gate{}
	scaled.configure(DefaultRateLimit, 60)
	if got := admitted(scaled, DefaultRateLimit, time.Second); got != DefaultRateLimit {
		t.Errorf("scale 60: %d of %d requests in a second admitted, want all (a minute lasts a second)", got, DefaultRateLimit)
	}
	real := &gate{}
	real.configure(DefaultRateLimit, 1)
	if got := admitted(real, DefaultRateLimit, time.Second); got >= DefaultRateLimit {
		t.Errorf("scale 1: %d of %d requests in a second admitted, want fewer (the bucket and a second's refill)", got, DefaultRateLimit)
	}
	// The same count per scaled minute: the bucket is as large, and
	// refills s times faster.
	if scaled.lim.Burst() != real.lim.Burst() || float64(scaled.lim.Limit()) != 60*float64(real.lim.Limit()) {
		t.Errorf("scale 60: burst %d, refill %v; scale 1: burst %d, refill %v", scaled.lim.Burst(), scaled.lim.Limit(), real.lim.Burst(), real.lim.Limit())
	}
	// Past a scaled minute's refill the limiter keeps under karvi's own
	// bucket at the same scale: 120 a second on top of the bucket.
	if got := admitted(scaled, 10*DefaultRateLimit, 2*time.Second); got > DefaultRateLimit+2*DefaultRateLimit {
		t.Errorf("scale 60: %d requests in two seconds admitted, more than a scaled karvi takes", got)
	}
}

// Clients of one address with no scale and with scale 1 share one gate
// setting: neither resets the bucket of the other.
func TestGateScaleZeroIsOne(t *testing.T) {
	g := gateFor("http://gate-scale.test", 120, 0)
	lim := g.limiter()
	if gateFor("http://gate-scale.test", 120, 1).limiter() != lim {
		t.Error("scale 1 after 0 made a new limiter")
	}
	if gateFor("http://gate-scale.test", 120, 60).limiter() == lim {
		t.Error("scale 60 kept the real-time limiter")
	}
}
