package karvi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/testkit/karvifake"
)

const secret = "s3cret-T0KEN-do-not-leak"

func setup(t *testing.T, opts karvifake.Options, tasks ...karvifake.Task) (*karvifake.Server, *karvi.Client) {
	t.Helper()
	srv := karvifake.New(opts)
	for _, tk := range tasks {
		if err := srv.AddTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	url, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := karvi.New(url, opts.Token)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func asError(t *testing.T, err error) *karvi.Error {
	t.Helper()
	var ke *karvi.Error
	if !errors.As(err, &ke) {
		t.Fatalf("err = %v (%T), want *karvi.Error", err, err)
	}
	return ke
}

func withBrief(id, status string) karvifake.Task {
	return karvifake.Task{ID: id, Status: status, BriefPath: true, Brief: json.RawMessage(`{}`)}
}

func TestBriefRoundTrip(t *testing.T) {
	srv, c := setup(t, karvifake.Options{Token: secret}, withBrief("T5", "in_progress"),
		karvifake.Task{ID: "T6", Status: "dispatched", BriefPath: true})
	ctx := context.Background()
	if err := c.PatchBrief(ctx, "T5", json.RawMessage(`{"log":[1,2],"plan":{"name":"karvi-t5"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.PatchBrief(ctx, "T5", json.RawMessage(`{"log":[3],"plan":{"totalPhases":3}}`)); err != nil {
		t.Fatal(err)
	}
	raw, err := c.GetBrief(ctx, "T5")
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(b["log"]) != "[3]" || b["plan"].(map[string]any)["name"] != "karvi-t5" || b["meta"].(map[string]any)["taskId"] != "T5" {
		t.Fatalf("brief = %s", raw)
	}
	if err := c.PutBrief(ctx, "T6", json.RawMessage(`{"plan":{}}`)); err != nil {
		t.Fatalf("PUT creates when the task has a briefPath: %v", err)
	}
	if srv.Brief("T6") == nil {
		t.Fatal("PUT did not create the brief")
	}
}

func TestNoBriefIsNotRetryable(t *testing.T) {
	_, c := setup(t, karvifake.Options{},
		karvifake.Task{ID: "NOPATH", Status: "dispatched"},
		karvifake.Task{ID: "PATHONLY", Status: "dispatched", BriefPath: true})
	ctx := context.Background()
	for _, err := range []error{
		c.PatchBrief(ctx, "NOPATH", json.RawMessage(`{}`)),
		c.PatchBrief(ctx, "PATHONLY", json.RawMessage(`{}`)),
		c.PutBrief(ctx, "NOPATH", json.RawMessage(`{}`)),
		func() error { _, err := c.GetBrief(ctx, "PATHONLY"); return err }(),
		c.PatchBrief(ctx, "MISSING", json.RawMessage(`{}`)),
	} {
		ke := asError(t, err)
		if !karvi.IsNoBrief(err) || karvi.IsRetryable(err) || !karvi.IsPermanent(err) || ke.Status != 404 || ke.Message != "no brief for this task" {
			t.Errorf("err = %#v, want non-retryable NoBrief 404", ke)
		}
	}
}

func TestIllegalTransitionKeepsKarviMessage(t *testing.T) {
	_, c := setup(t, karvifake.Options{}, karvifake.Task{ID: "T1", Status: "approved"}, karvifake.Task{ID: "T2", Status: "dispatched"})
	err := c.SetTaskStatus(context.Background(), "T1", "in_progress", "")
	ke := asError(t, err)
	if ke.Kind != karvi.KindIllegalTransition || ke.Status != 400 || karvi.IsRetryable(err) ||
		ke.Message != "Invalid task status transition: approved -> in_progress" {
		t.Fatalf("err = %#v", ke)
	}
	if !strings.Contains(err.Error(), "Invalid task status transition: approved -> in_progress") {
		t.Fatalf("error text %q lost karvi's message", err)
	}
	// karvi refuses X -> X as well.
	if err := c.SetTaskStatus(context.Background(), "T2", "dispatched", ""); !karvi.IsIllegalTransition(err) {
		t.Fatalf("same-status err = %v", err)
	}
}

func TestUnauthorized(t *testing.T) {
	srv, good := setup(t, karvifake.Options{Token: secret, ViewerToken: "viewer-tok"}, withBrief("T1", "dispatched"))
	ctx := context.Background()
	for _, tok := range []string{"", "wrong-token"} {
		c, err := karvi.New(srv.URL(), tok)
		if err != nil {
			t.Fatal(err)
		}
		err = c.PatchBrief(ctx, "T1", json.RawMessage(`{}`))
		if ke := asError(t, err); ke.Kind != karvi.KindUnauthorized || ke.Status != 401 || karvi.IsRetryable(err) {
			t.Fatalf("token %q: %#v", tok, ke)
		}
	}
	viewer, _ := karvi.New(srv.URL(), "viewer-tok")
	if _, err := viewer.GetTask(ctx, "T1"); err != nil {
		t.Fatalf("viewer read: %v", err)
	}
	err := viewer.SetTaskStatus(ctx, "T1", "in_progress", "")
	if ke := asError(t, err); ke.Kind != karvi.KindUnauthorized || ke.Status != 403 || !strings.Contains(ke.Message, "forbidden") {
		t.Fatalf("viewer write: %#v", ke)
	}
	if err := good.SetTaskStatus(ctx, "T1", "in_progress", ""); err != nil {
		t.Fatalf("admin write: %v", err)
	}
}

func TestServerErrorsAreRetryable(t *testing.T) {
	srv, c := setup(t, karvifake.Options{}, withBrief("T1", "dispatched"))
	ctx := context.Background()
	// 429 is not among them: the client waits out karvi's Retry-After and
	// sends again itself (limit_test.go).
	for _, code := range []int{500, 502, 503} {
		srv.FailNext(1, code)
		err := c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":1}`))
		if ke := asError(t, err); ke.Kind != karvi.KindTransient || ke.Status != code || !karvi.IsRetryable(err) || karvi.IsPermanent(err) {
			t.Fatalf("HTTP %d: %#v", code, ke)
		}
	}
	if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatalf("after the injected failures: %v", err)
	}
	if n := len(srv.Writes("T1")); n != 1 {
		t.Fatalf("%d writes, want 1", n)
	}
}

func TestConnectionRefusedIsRetryableAndRecovers(t *testing.T) {
	srv, c := setup(t, karvifake.Options{Token: secret}, withBrief("T1", "dispatched"))
	ctx := context.Background()
	if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDown(true); err != nil {
		t.Fatal(err)
	}
	var refused error
	for i := 0; i < 2; i++ { // the first may hit the closed pooled connection
		refused = c.PatchBrief(ctx, "T1", json.RawMessage(`{"b":2}`))
		if !karvi.IsRetryable(refused) {
			t.Fatalf("while down: %v, want retryable", refused)
		}
	}
	if !errors.Is(refused, syscall.ECONNREFUSED) {
		t.Fatalf("while down: %v, want connection refused in the chain", refused)
	}
	if strings.Contains(refused.Error(), secret) {
		t.Fatal("token in error text")
	}
	if err := srv.SetDown(false); err != nil {
		t.Fatal(err)
	}
	if err := c.PatchBrief(ctx, "T1", json.RawMessage(`{"b":2}`)); err != nil {
		t.Fatalf("after coming back on the same port: %v", err)
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	srv, _ := setup(t, karvifake.Options{}, withBrief("T1", "dispatched"))
	srv.SetLatency(5 * time.Second)
	c, err := karvi.New(srv.URL(), "", karvi.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = c.PatchBrief(context.Background(), "T1", json.RawMessage(`{}`))
	if !karvi.IsRetryable(err) {
		t.Fatalf("timeout: %v, want retryable", err)
	}
	srv.SetLatency(0)
}

func TestNotFoundAndBadRequest(t *testing.T) {
	srv, c := setup(t, karvifake.Options{}, withBrief("T1", "dispatched"))
	ctx := context.Background()
	err := c.SetTaskStatus(ctx, "NOPE", "in_progress", "")
	if ke := asError(t, err); ke.Kind != karvi.KindNotFound || ke.Status != 404 || ke.Message != "Task NOPE not found" {
		t.Fatalf("missing task status: %#v", ke)
	}
	if _, err := c.GetTask(ctx, "NOPE"); !karvi.IsNotFound(err) {
		t.Fatalf("GetTask missing: %v", err)
	}
	err = c.SetTaskStatus(ctx, "T1", "done", "")
	if ke := asError(t, err); ke.Kind != karvi.KindBadRequest || ke.Status != 400 || !strings.HasPrefix(ke.Message, "Invalid status.") {
		t.Fatalf("invalid status: %#v", ke)
	}
	// Refused before sending: nothing reaches karvi.
	for name, err := range map[string]error{
		"bad id":         c.PatchBrief(ctx, "T/1", json.RawMessage(`{}`)),
		"empty id":       c.SetTaskStatus(ctx, "", "in_progress", ""),
		"array body":     c.PatchBrief(ctx, "T1", json.RawMessage(`[1]`)),
		"null body":      c.PutBrief(ctx, "T1", json.RawMessage(`null`)),
		"broken body":    c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":`)),
		"dispatch field": c.UpdateTask(ctx, "T1", map[string]any{"dispatch": map[string]any{"state": "failed"}}),
	} {
		if ke := asError(t, err); ke.Kind != karvi.KindBadRequest || ke.Status != 0 {
			t.Errorf("%s: %#v", name, ke)
		}
	}
	if n := len(srv.Writes("")); n != 0 {
		t.Fatalf("%d writes reached the server", n)
	}
}

func TestGetTaskAndUpdate(t *testing.T) {
	_, c := setup(t, karvifake.Options{}, withBrief("T1", "in_progress"), karvifake.Task{ID: "T2", Status: "pending", Title: "two"})
	ctx := context.Background()
	if err := c.SetTaskStatus(ctx, "T1", "blocked", "Phase test failed: exit 1"); err != nil {
		t.Fatal(err)
	}
	tk, err := c.GetTask(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != "blocked" || tk.BriefPath == "" || tk.Blocker == nil || tk.Blocker.Reason != "Phase test failed: exit 1" || tk.Blocker.AskedAt == "" {
		t.Fatalf("task = %+v blocker %+v", tk, tk.Blocker)
	}
	err = c.UpdateTask(ctx, "T1", map[string]any{"result": map[string]any{"summary": "s"}, "blocker": map[string]any{"reason": "r", "askedAt": "2026-01-01T00:00:00Z"}})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ = c.GetTask(ctx, "T1")
	if string(tk.Result) != `{"summary":"s"}` || tk.Blocker.Reason != "r" || tk.Blocker.AskedAt != "2026-01-01T00:00:00Z" {
		t.Fatalf("after update: %+v %+v", tk, tk.Blocker)
	}
	tasks, err := c.ListTasks(ctx)
	if err != nil || len(tasks) != 2 || tasks[1].Title != "two" || tasks[1].Blocker != nil {
		t.Fatalf("ListTasks = %+v, %v", tasks, err)
	}
}

func TestTaskDecodingIsTolerant(t *testing.T) {
	var tk karvi.Task
	raw := `{"id":"T1","status":"blocked","blocker":"odd","dispatch":{"state":"failed","planId":"p","lastError":null},"result":null,"extra":[1]}`
	if err := json.Unmarshal([]byte(raw), &tk); err != nil {
		t.Fatal(err)
	}
	if tk.ID != "T1" || tk.Blocker != nil || tk.Dispatch == nil || tk.Dispatch.State != "failed" || tk.Dispatch.LastError != "" || tk.Result != nil || string(tk.Raw) != raw {
		t.Fatalf("decoded %+v", tk)
	}
}

func TestTokenNeverInErrorsOrFormatting(t *testing.T) {
	// A hostile or buggy server that echoes the Authorization header.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := 400
		if strings.Contains(r.URL.Path, "status") {
			code = 503
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"you sent %s"}`, r.Header.Get("Authorization"))
	}))
	defer echo.Close()
	c, err := karvi.New(echo.URL, secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	errs := []error{
		c.PatchBrief(ctx, "T1", json.RawMessage(`{}`)),
		c.SetTaskStatus(ctx, "T1", "blocked", "r"),
		func() error { _, err := c.GetTask(ctx, "T1"); return err }(),
	}
	// And every kind from the fake, with the token configured.
	srv, fc := setup(t, karvifake.Options{Token: secret, ViewerToken: "v"}, karvifake.Task{ID: "T1", Status: "approved"})
	errs = append(errs,
		fc.PatchBrief(ctx, "T1", json.RawMessage(`{}`)),      // 404 no brief
		fc.SetTaskStatus(ctx, "T1", "in_progress", ""),       // 400 illegal
		fc.SetTaskStatus(ctx, "NOPE", "in_progress", ""),     // 404 not found
		fc.UpdateTask(ctx, "T1", map[string]any{"bogus": 1}), // refused locally
	)
	srv.FailNext(1, 503)
	errs = append(errs, fc.SetTaskStatus(ctx, "T1", "completed", ""))
	_ = srv.SetDown(true)
	errs = append(errs, fc.PatchBrief(ctx, "T1", json.RawMessage(`{}`)), fc.PatchBrief(ctx, "T1", json.RawMessage(`{}`)))
	_ = srv.SetDown(false)
	errs = append(errs, karvi.RetryTransient(ctx, func(ctx context.Context) error {
		srv.FailNext(1, 503)
		return fc.PatchBrief(ctx, "T1", json.RawMessage(`{}`))
	}, karvi.Backoff{Initial: time.Millisecond, MaxAttempts: 2}))
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(text, secret) {
				t.Errorf("case %d: token in %q", i, text)
			}
		}
	}
	for _, text := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(*c), fmt.Sprintf("%v", []*karvi.Client{c})} {
		if strings.Contains(text, secret) {
			t.Errorf("token in formatted client %q", text)
		}
	}
}

func TestNewValidatesURL(t *testing.T) {
	for _, bad := range []string{"", "localhost:3461", "ftp://h", "http://", "http://u:" + secret + "@h", "http://h/?x=1", "http://h/#f", "://"} {
		_, err := karvi.New(bad, "")
		if err == nil {
			t.Errorf("New(%q) accepted", bad)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("New(%q) error leaks the password: %v", bad, err)
		}
	}
	if _, err := karvi.New("http://h", "a\nb"); err == nil {
		t.Error("token with a newline accepted")
	}
	c, err := karvi.New("http://127.0.0.1:3461/", "")
	if err != nil || c.BaseURL != "http://127.0.0.1:3461" {
		t.Fatalf("New = %+v, %v", c, err)
	}
}

func TestRetryTransient(t *testing.T) {
	srv, c := setup(t, karvifake.Options{}, withBrief("T1", "dispatched"), karvifake.Task{ID: "T2", Status: "approved"})
	ctx := context.Background()
	fast := karvi.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Multiplier: 2}

	srv.FailNext(3, 503)
	attempts := 0
	err := karvi.RetryTransient(ctx, func(ctx context.Context) error {
		attempts++
		return c.PatchBrief(ctx, "T1", json.RawMessage(`{"a":1}`))
	}, fast)
	if err != nil || attempts != 4 {
		t.Fatalf("err %v after %d attempts, want success on the 4th", err, attempts)
	}
	if n := len(srv.Writes("T1")); n != 1 {
		t.Fatalf("%d writes, want exactly 1", n)
	}

	attempts = 0
	err = karvi.RetryTransient(ctx, func(ctx context.Context) error {
		attempts++
		return c.SetTaskStatus(ctx, "T2", "in_progress", "")
	}, fast)
	if !karvi.IsIllegalTransition(err) || attempts != 1 {
		t.Fatalf("non-retryable: err %v after %d attempts, want 1 attempt", err, attempts)
	}

	srv.FailNext(100, 503)
	attempts = 0
	err = karvi.RetryTransient(ctx, func(ctx context.Context) error {
		attempts++
		return c.PatchBrief(ctx, "T1", json.RawMessage(`{}`))
	}, karvi.Backoff{Initial: time.Millisecond, MaxAttempts: 3})
	if !karvi.IsRetryable(err) || attempts != 3 {
		t.Fatalf("max attempts: err %v after %d attempts", err, attempts)
	}

	cctx, cancel := context.WithCancel(ctx)
	attempts = 0
	err = karvi.RetryTransient(cctx, func(ctx context.Context) error {
		attempts++
		cancel()
		return c.PatchBrief(context.Background(), "T1", json.RawMessage(`{}`))
	}, karvi.Backoff{Initial: time.Hour})
	if !errors.Is(err, context.Canceled) || !karvi.IsRetryable(err) || attempts != 1 {
		t.Fatalf("cancelled: err %v after %d attempts", err, attempts)
	}
	srv.FailNext(0, 0)
}
