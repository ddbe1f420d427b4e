package karvi

import (
	"reflect"
	"testing"
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
