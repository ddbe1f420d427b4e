package karvifake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var fixedNow = time.Date(2026, 2, 28, 3, 5, 0, 0, time.UTC)

func start(t *testing.T, opts Options, tasks ...Task) (*Server, string) {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixedNow }
	}
	s := New(opts)
	for _, tk := range tasks {
		if err := s.AddTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	url, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

type answer struct {
	code int
	body []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d %q is not a JSON object: %v", a.code, a.body, err)
	}
	return m
}

func (a answer) errText(t *testing.T) string {
	t.Helper()
	s, _ := a.json(t)["error"].(string)
	return s
}

func call(t *testing.T, method, url, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, b}
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// expectedTransitions is karvi's status transition table (management.js
// ALLOWED_TASK_TRANSITIONS), written out independently of
// karvi.Transitions so a typo in either shows up here.
var expectedTransitions = map[string][]string{
	"pending":        {"dispatched", "cancelled"},
	"dispatched":     {"in_progress", "pending", "cancelled"},
	"in_progress":    {"blocked", "completed", "dispatched", "cancelled"},
	"blocked":        {"in_progress", "dispatched", "cancelled"},
	"completed":      {"reviewing", "approved", "needs_revision"},
	"reviewing":      {"approved", "needs_revision"},
	"needs_revision": {"in_progress", "approved"},
	"approved":       nil,
	"cancelled":      nil,
}

func TestStatusTransitionsExhaustive(t *testing.T) {
	statuses := []string{"pending", "dispatched", "in_progress", "blocked", "completed", "reviewing", "approved", "needs_revision", "cancelled"}
	froms := append([]string{""}, statuses...) // "" behaves as pending
	for _, from := range froms {
		for _, to := range statuses {
			name := fmt.Sprintf("%q->%s", from, to)
			t.Run(name, func(t *testing.T) {
				_, url := start(t, Options{}, Task{ID: "T1", Status: from})
				a := call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"`+to+`"}`)
				key := from
				if key == "" {
					key = "pending"
				}
				legal := false
				for _, s := range expectedTransitions[key] {
					legal = legal || s == to
				}
				if legal {
					if a.code != 200 {
						t.Fatalf("legal transition answered %d %s", a.code, a.body)
					}
					if got := a.json(t)["task"].(map[string]any)["status"]; got != to {
						t.Fatalf("task status after = %v, want %s", got, to)
					}
					return
				}
				want := fmt.Sprintf("Invalid task status transition: %s -> %s", key, to)
				if a.code != 400 || a.errText(t) != want {
					t.Fatalf("illegal transition answered %d %s, want 400 %q", a.code, a.body, want)
				}
			})
		}
	}
}

func TestStatusValidationAndNotFound(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "dispatched"})
	a := call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"done"}`)
	if a.code != 400 || !strings.HasPrefix(a.errText(t), "Invalid status. Must be one of: pending, dispatched,") {
		t.Fatalf("bad status: %d %s", a.code, a.body)
	}
	// karvi checks the status before looking the task up.
	a = call(t, "POST", url+"/api/tasks/NOPE/status", "", `{"status":"bogus"}`)
	if a.code != 400 {
		t.Fatalf("bad status on missing task: %d %s, want 400", a.code, a.body)
	}
	a = call(t, "POST", url+"/api/tasks/NOPE/status", "", `{"status":"in_progress"}`)
	if a.code != 404 || a.errText(t) != "Task NOPE not found" {
		t.Fatalf("missing task: %d %s", a.code, a.body)
	}
	a = call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":`)
	if a.code != 400 {
		t.Fatalf("broken JSON: %d %s", a.code, a.body)
	}
	if n := len(s.Writes("")); n != 0 {
		t.Fatalf("refused writes were recorded: %d", n)
	}
}

func TestBlockerRules(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "in_progress"})
	a := call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"blocked","reason":"Phase test failed: exit 1"}`)
	if a.code != 200 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	tk, _ := s.Task("T1")
	if tk.Blocker == nil || tk.Blocker.Reason != "Phase test failed: exit 1" || tk.Blocker.AskedAt != "2026-02-28T03:05:00.000Z" {
		t.Fatalf("blocker = %+v", tk.Blocker)
	}
	// Leaving blocked clears the blocker to null.
	call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"dispatched"}`)
	tk, _ = s.Task("T1")
	if tk.Blocker != nil || string(tk.BlockerRaw) != "null" {
		t.Fatalf("blocker after leaving blocked = %+v %s, want null", tk.Blocker, tk.BlockerRaw)
	}
	// blocked without a reason sets no blocker.
	call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"in_progress"}`)
	call(t, "POST", url+"/api/tasks/T1/status", "", `{"status":"blocked"}`)
	tk, _ = s.Task("T1")
	if tk.Status != "blocked" || tk.Blocker != nil {
		t.Fatalf("status %s blocker %+v, want blocked with no blocker", tk.Status, tk.Blocker)
	}
	if tk.StartedAt == "" || len(tk.History) != 4 {
		t.Fatalf("startedAt %q, %d history entries, want set and 4", tk.StartedAt, len(tk.History))
	}
}

func TestUpdateRoute(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "in_progress"})
	a := call(t, "POST", url+"/api/tasks/T1/update", "", `{"result":{"summary":"ok"},"dispatch":{"state":"completed"}}`)
	if a.code != 200 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	tk, _ := s.Task("T1")
	if string(tk.Result) != `{"summary":"ok"}` || tk.Dispatch != nil {
		t.Fatalf("result %s dispatch %s: result stored, dispatch ignored expected", tk.Result, tk.Dispatch)
	}
	a = call(t, "POST", url+"/api/tasks/T1/update", "", `{"status":"approved"}`)
	if a.code != 400 || a.errText(t) != "Invalid task status transition: in_progress -> approved" {
		t.Fatalf("illegal update: %d %s", a.code, a.body)
	}
	call(t, "POST", url+"/api/tasks/T1/update", "", `{"status":"blocked"}`)
	tk, _ = s.Task("T1")
	if tk.Status != "blocked" || tk.Blocker == nil || tk.Blocker.Reason != "Unknown block" {
		t.Fatalf("status %s blocker %+v, want blocked / Unknown block", tk.Status, tk.Blocker)
	}
	call(t, "POST", url+"/api/tasks/T1/update", "", `{"blocker":{"reason":"r2","askedAt":"2026-01-01T00:00:00Z"}}`)
	tk, _ = s.Task("T1")
	if tk.Blocker.Reason != "r2" || tk.Blocker.AskedAt != "2026-01-01T00:00:00Z" {
		t.Fatalf("blocker after update = %+v", tk.Blocker)
	}
	if a := call(t, "POST", url+"/api/tasks/NOPE/update", "", `{}`); a.code != 404 {
		t.Fatalf("missing task update: %d", a.code)
	}
}

func TestBriefDeepMergeOverHTTP(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T5", Status: "in_progress", BriefPath: true,
		Brief: json.RawMessage(`{"meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda"},"log":[{"a":1},{"a":2}],"phases":{"implement":{"status":"running","attempts":1}}}`)})
	patches := []string{
		`{"phases":{"implement":{"status":"passed","cost_usd":0.85}},"completedPhases":1}`,
		`{"log":[{"a":3}]}`,
		`{"cost":{"total_usd":null}}`,
		`{"phases":{"test":{"status":"running"}},"currentPhase":"test"}`,
	}
	for _, p := range patches {
		if a := call(t, "PATCH", url+"/api/brief/T5", "", p); a.code != 200 || a.json(t)["ok"] != true || a.json(t)["taskId"] != "T5" {
			t.Fatalf("PATCH %s: %d %s", p, a.code, a.body)
		}
	}
	want := mustJSON(t, `{
	  "meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda","updatedAt":"2026-02-28T03:05:00.000Z"},
	  "log":[{"a":3}],
	  "phases":{"implement":{"status":"passed","attempts":1,"cost_usd":0.85},"test":{"status":"running"}},
	  "completedPhases":1,"currentPhase":"test","cost":{"total_usd":null}}`)
	if got := s.Brief("T5"); !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Fatalf("brief = %s", g)
	}
	a := call(t, "GET", url+"/api/brief/T5", "", "")
	if a.code != 200 || !reflect.DeepEqual(a.json(t), want) {
		t.Fatalf("GET brief: %d %s", a.code, a.body)
	}
	ws := s.Writes("T5")
	if len(ws) != len(patches) {
		t.Fatalf("%d writes recorded, want %d", len(ws), len(patches))
	}
	for i, w := range ws {
		if w.Method != "PATCH" || w.Path != "/api/brief/T5" || string(w.Body) != patches[i] || w.At.IsZero() {
			t.Fatalf("write %d = %+v, want PATCH of %s", i, w, patches[i])
		}
	}
}

func TestBrief404AndPutCreates(t *testing.T) {
	s, url := start(t, Options{},
		Task{ID: "NOPATH", Status: "dispatched"},
		Task{ID: "PATHONLY", Status: "dispatched", BriefPath: true})
	for _, c := range []struct{ method, id string }{
		{"GET", "NOPATH"}, {"PATCH", "NOPATH"}, {"PUT", "NOPATH"},
		{"GET", "PATHONLY"}, {"PATCH", "PATHONLY"},
		{"GET", "MISSING"}, {"PATCH", "MISSING"}, {"PUT", "MISSING"},
	} {
		a := call(t, c.method, url+"/api/brief/"+c.id, "", `{"a":1}`)
		if c.method == "GET" {
			a = call(t, c.method, url+"/api/brief/"+c.id, "", "")
		}
		if a.code != 404 || a.errText(t) != "no brief for this task" {
			t.Errorf("%s %s: %d %s, want 404 no brief for this task", c.method, c.id, a.code, a.body)
		}
	}
	if a := call(t, "PUT", url+"/api/brief/PATHONLY", "", `{"plan":{"name":"karvi-t5"}}`); a.code != 200 {
		t.Fatalf("PUT with briefPath: %d %s", a.code, a.body)
	}
	want := mustJSON(t, `{"plan":{"name":"karvi-t5"},"meta":{"updatedAt":"2026-02-28T03:05:00.000Z","boardType":"brief","version":1,"taskId":"PATHONLY"}}`)
	if got := s.Brief("PATHONLY"); !reflect.DeepEqual(got, want) {
		t.Fatalf("brief after PUT = %v", got)
	}
	if a := call(t, "PATCH", url+"/api/brief/PATHONLY", "", `{"x":1}`); a.code != 200 {
		t.Fatalf("PATCH after PUT: %d %s", a.code, a.body)
	}
	// PUT replaces, it does not merge.
	call(t, "PUT", url+"/api/brief/PATHONLY", "", `{"y":2}`)
	if got := s.Brief("PATHONLY"); got["x"] != nil || got["plan"] != nil || got["y"] != 2.0 {
		t.Fatalf("brief after second PUT = %v", got)
	}
	if n := len(s.Writes("NOPATH")); n != 0 {
		t.Fatalf("refused writes recorded: %d", n)
	}
}

func TestBriefBodyAndRouteEdges(t *testing.T) {
	s, url := start(t, Options{MaxBody: 64}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	cases := []struct {
		method, path, body string
		code               int
		errText            string
	}{
		{"PATCH", "/api/brief/T1", `{"a":`, 400, "Invalid JSON body"},
		{"PATCH", "/api/brief/T1", `null`, 400, "Cannot convert undefined or null to object"},
		{"PATCH", "/api/brief/T1", `[1,2]`, 400, ""},
		{"PATCH", "/api/brief/T1", `{"a":"` + strings.Repeat("x", 100) + `"}`, 413, "Payload too large"},
		{"PATCH", "/api/brief/T1?x=1", `{}`, 404, ""}, // karvi's regex includes the query: static 404
		{"PATCH", "/api/brief/T.1", `{}`, 404, ""},
		{"DELETE", "/api/brief/T1", ``, 404, ""},
		{"PATCH", "/api/brief/T1", ``, 200, ""}, // empty body is {}
	}
	for _, c := range cases {
		a := call(t, c.method, url+c.path, "", c.body)
		if a.code != c.code {
			t.Errorf("%s %s %q: %d %s, want %d", c.method, c.path, c.body, a.code, a.body, c.code)
			continue
		}
		if c.errText != "" && a.errText(t) != c.errText {
			t.Errorf("%s %s: error %q, want %q", c.method, c.path, a.errText(t), c.errText)
		}
	}
	if n := len(s.Writes("T1")); n != 1 {
		t.Fatalf("%d writes recorded, want only the empty-body PATCH", n)
	}
}

func TestAuthRoles(t *testing.T) {
	s, url := start(t, Options{Token: "admin-tok", OperatorToken: "op-tok", ViewerToken: "view-tok"},
		Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	type c struct {
		method, path, token, body string
		code                      int
	}
	for _, tc := range []c{
		{"GET", "/api/tasks", "", "", 401},
		{"GET", "/api/tasks", "wrong", "", 401},
		{"PATCH", "/api/brief/T1", "", `{}`, 401},
		{"GET", "/api/tasks", "view-tok", "", 200},
		{"GET", "/api/brief/T1", "view-tok", "", 200},
		{"PATCH", "/api/brief/T1", "view-tok", `{"a":1}`, 403},
		{"POST", "/api/tasks/T1/status", "view-tok", `{"status":"in_progress"}`, 403},
		{"POST", "/api/tasks/T1/update", "view-tok", `{"result":{"a":1}}`, 403},
		{"PATCH", "/api/brief/T1", "op-tok", `{"a":1}`, 200},
		{"POST", "/api/tasks/T1/status", "op-tok", `{"status":"in_progress"}`, 200},
		{"PATCH", "/api/brief/T1", "admin-tok", `{"b":1}`, 200},
		{"GET", "/health", "", "", 200}, // outside /api/: no token needed
	} {
		a := call(t, tc.method, url+tc.path, tc.token, tc.body)
		if a.code != tc.code {
			t.Errorf("%s %s with %q: %d %s, want %d", tc.method, tc.path, tc.token, a.code, a.body, tc.code)
			continue
		}
		switch tc.code {
		case 401:
			if a.errText(t) != "unauthorized" {
				t.Errorf("401 body %s", a.body)
			}
		case 403:
			m := a.json(t)
			if m["error"] != "forbidden" || m["requiredRole"] != "operator" || m["currentRole"] != "viewer" {
				t.Errorf("403 body %s", a.body)
			}
		}
	}
	if n := len(s.Writes("T1")); n != 3 {
		t.Fatalf("%d writes recorded, want the 3 authorised ones", n)
	}
	// "bearer" is case-insensitive in karvi.
	req, _ := http.NewRequest("GET", url+"/api/tasks", nil)
	req.Header.Set("Authorization", "bearer admin-tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("lower-case bearer: %d", resp.StatusCode)
	}
}

func TestListTasks(t *testing.T) {
	_, url := start(t, Options{},
		Task{ID: "T2", Status: "pending"},
		Task{ID: "T1", Status: "dispatched", BriefPath: true})
	for _, path := range []string{"/api/tasks", "/api/tasks/T1", "/api/tasks?x=1"} {
		a := call(t, "GET", url+path, "", "")
		if a.code != 200 {
			t.Fatalf("GET %s: %d", path, a.code)
		}
		tasks := a.json(t)["tasks"].([]any)
		if len(tasks) != 2 || tasks[0].(map[string]any)["id"] != "T2" || tasks[1].(map[string]any)["briefPath"] != "briefs/T1.json" {
			t.Fatalf("GET %s tasks = %v", path, tasks)
		}
	}
}

func TestFailNextIsNotRecorded(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	s.FailNext(2, 503)
	for i := 0; i < 2; i++ {
		if a := call(t, "PATCH", url+"/api/brief/T1", "", `{"n":1}`); a.code != 503 || a.errText(t) != "injected failure" {
			t.Fatalf("attempt %d: %d %s", i, a.code, a.body)
		}
	}
	if a := call(t, "GET", url+"/api/brief/T1", "", ""); a.code != 200 {
		t.Fatalf("reads are not failed: %d", a.code)
	}
	if a := call(t, "PATCH", url+"/api/brief/T1", "", `{"n":2}`); a.code != 200 {
		t.Fatalf("third attempt: %d", a.code)
	}
	ws := s.Writes("T1")
	if len(ws) != 1 || string(ws[0].Body) != `{"n":2}` || s.Brief("T1")["n"] != 2.0 {
		t.Fatalf("writes %v brief %v: only the accepted PATCH should count", ws, s.Brief("T1"))
	}
}

func TestSetDownRefusesThenComesBackOnSamePort(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	if a := call(t, "PATCH", url+"/api/brief/T1", "", `{"a":1}`); a.code != 200 {
		t.Fatal(a.code)
	}
	if err := s.SetDown(true); err != nil {
		t.Fatal(err)
	}
	_, err := net.Dial("tcp", s.Addr())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while down: %v, want connection refused", err)
	}
	// A pooled keep-alive connection must not survive either.
	if _, err := http.DefaultClient.Post(url+"/api/tasks/T1/status", "application/json", strings.NewReader(`{"status":"in_progress"}`)); err == nil {
		t.Fatal("request while down succeeded")
	}
	if err := s.SetDown(false); err != nil {
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Fatalf("URL changed from %s to %s", url, s.URL())
	}
	if a := call(t, "PATCH", url+"/api/brief/T1", "", `{"b":2}`); a.code != 200 {
		t.Fatal(a.code)
	}
	if b := s.Brief("T1"); b["a"] != 1.0 || b["b"] != 2.0 {
		t.Fatalf("state lost across down/up: %v", b)
	}
	// Down and up again, repeatedly.
	for i := 0; i < 3; i++ {
		if err := s.SetDown(true); err != nil {
			t.Fatal(err)
		}
		if err := s.SetDown(false); err != nil {
			t.Fatal(err)
		}
	}
	if a := call(t, "GET", url+"/api/brief/T1", "", ""); a.code != 200 {
		t.Fatal(a.code)
	}
}

func TestLatencyAndReceiptTime(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	const d = 30 * time.Millisecond
	s.SetLatency(d)
	before := time.Now()
	call(t, "PATCH", url+"/api/brief/T1", "", `{"a":1}`)
	elapsed := time.Since(before)
	if elapsed < d {
		t.Fatalf("answer took %v, less than the injected %v", elapsed, d)
	}
	ws := s.Writes("T1")
	if len(ws) != 1 || ws[0].At.Before(before) || ws[0].At.After(before.Add(elapsed)) {
		t.Fatalf("write time %v outside the request window", ws)
	}
}

func TestConcurrentWritesNoneLost(t *testing.T) {
	s, url := start(t, Options{}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest("PATCH", url+"/api/brief/T1", bytes.NewReader([]byte(fmt.Sprintf(`{"phases":{"p%d":{"n":%d}}}`, i, i))))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.WaitWrites(ctx, "T1", n); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if phases := s.Brief("T1")["phases"].(map[string]any); len(phases) != n {
		t.Fatalf("%d phases merged, want %d", len(phases), n)
	}
}

func TestWaitWritesHonoursContext(t *testing.T) {
	s, _ := start(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.WaitWrites(ctx, "T1", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:80"} {
		if _, err := New(Options{Addr: addr}).Start(); err == nil {
			t.Errorf("Start on %q succeeded", addr)
		}
	}
}

func TestAddTaskValidates(t *testing.T) {
	s := New(Options{})
	for _, tk := range []Task{
		{ID: "a/b"},
		{ID: "T1", Brief: json.RawMessage(`{}`)}, // brief without briefPath
		{ID: "T1", BriefPath: true, Brief: json.RawMessage(`[]`)}, // not an object
	} {
		if err := s.AddTask(tk); err == nil {
			t.Errorf("AddTask(%+v) succeeded", tk)
		}
	}
}

func TestFakeWritesEndpoint(t *testing.T) {
	_, url := start(t, Options{Token: "tok"}, Task{ID: "T1", Status: "dispatched", BriefPath: true, Brief: json.RawMessage(`{}`)})
	call(t, "PATCH", url+"/api/brief/T1", "tok", `{"a":1}`)
	a := call(t, "GET", url+"/_fake/writes/T1", "", "")
	var ws []Write
	if err := json.Unmarshal(a.body, &ws); err != nil || len(ws) != 1 || ws[0].Method != "PATCH" {
		t.Fatalf("/_fake/writes: %d %s %v", a.code, a.body, err)
	}
}
