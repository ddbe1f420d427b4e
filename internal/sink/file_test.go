package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/testkit/karvifake"
)

var fixed = time.Date(2026, 2, 28, 3, 5, 0, 0, time.UTC)

func clock() time.Time { return fixed }

func newFile(t *testing.T) *sink.File {
	t.Helper()
	f, err := sink.NewFile(filepath.Join(t.TempDir(), "briefs"), sink.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The start of example B's patch sequence (docs/contract.md §10), plus a
// null and a log.
var patches = []string{
	`{"meta":{"boardType":"brief","version":1,"taskId":"T5","runtime":"edda"},"plan":{"source":"generated","name":"karvi-t5","totalPhases":3},"completedPhases":0}`,
	`{"phases":{"implement":{"status":"running","attempts":1,"startedAt":"2026-02-28T03:00:00Z"}},"currentPhase":"implement","log":[{"action":"phase_start","detail":"implement"}]}`,
	`{"phases":{"implement":{"status":"passed","duration_ms":119000,"cost_usd":0.85}},"completedPhases":1,"cost":{"by_phase":{"implement":0.85}}}`,
	`{"phases":{"test":{"status":"running","attempts":1}},"currentPhase":"test","log":[{"action":"phase_start","detail":"implement"},{"action":"phase_start","detail":"test"}]}`,
	`{"phases":{"test":{"status":"failed","error":"cmd ` + "`cargo test`" + ` exited 1"}}}`,
	`{"phases":{"test":{"status":"passed","cost_usd":null}},"cost":{"by_phase":{"test":null}}}`,
}

func TestFileBriefEqualsWhatKarviHolds(t *testing.T) {
	f := newFile(t)
	fake := karvifake.New(karvifake.Options{Now: clock})
	if err := fake.AddTask(karvifake.Task{ID: "T5", Status: "in_progress", BriefPath: true, Brief: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	url, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c, err := karvi.New(url, "")
	if err != nil {
		t.Fatal(err)
	}
	ks := sink.NewKarvi(c)
	ctx := context.Background()
	for _, p := range patches {
		if err := f.PatchBrief(ctx, "T5", json.RawMessage(p)); err != nil {
			t.Fatal(err)
		}
		if err := ks.PatchBrief(ctx, "T5", json.RawMessage(p)); err != nil {
			t.Fatal(err)
		}
	}
	fileBrief, err := f.Brief("T5")
	if err != nil {
		t.Fatal(err)
	}
	if want := fake.Brief("T5"); !reflect.DeepEqual(fileBrief, want) {
		a, _ := json.Marshal(fileBrief)
		b, _ := json.Marshal(want)
		t.Fatalf("file brief differs from karvi's:\n file  %s\n karvi %s", a, b)
	}
	// Spot-check the rules themselves.
	if log := fileBrief["log"].([]any); len(log) != 2 {
		t.Fatalf("log has %d entries, want the last PATCH's 2 (arrays replace)", len(log))
	}
	test := fileBrief["phases"].(map[string]any)["test"].(map[string]any)
	if v, ok := test["cost_usd"]; !ok || v != nil || test["error"] == nil {
		t.Fatalf("phases.test = %v: null must be stored and siblings kept", test)
	}
	if fileBrief["meta"].(map[string]any)["updatedAt"] != "2026-02-28T03:05:00.000Z" {
		t.Fatalf("meta = %v", fileBrief["meta"])
	}
}

func TestFilePatchTwiceSameBrief(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	for _, p := range patches[:3] {
		if err := f.PatchBrief(ctx, "T5", json.RawMessage(p)); err != nil {
			t.Fatal(err)
		}
	}
	briefPath := filepath.Join(f.TaskDir("T5"), sink.BriefFile)
	once := readFile(t, briefPath)
	// A retried PATCH: brief.json is unchanged, the audit shows it twice.
	if err := f.PatchBrief(ctx, "T5", json.RawMessage(patches[2])); err != nil {
		t.Fatal(err)
	}
	if twice := readFile(t, briefPath); !bytes.Equal(once, twice) {
		t.Fatalf("brief.json changed on a repeated PATCH:\n%s\n%s", once, twice)
	}
	lines := strings.Split(strings.TrimSpace(string(readFile(t, filepath.Join(f.TaskDir("T5"), sink.PatchesFile)))), "\n")
	if len(lines) != 4 {
		t.Fatalf("patches.jsonl has %d lines, want 4", len(lines))
	}
	var rec sink.PatchRecord
	if err := json.Unmarshal([]byte(lines[3]), &rec); err != nil {
		t.Fatal(err)
	}
	var body, want any
	_ = json.Unmarshal(rec.Body, &body)
	_ = json.Unmarshal([]byte(patches[2]), &want)
	if !reflect.DeepEqual(body, want) || rec.ReceivedAt != "2026-02-28T03:05:00Z" {
		t.Fatalf("audit record %+v", rec)
	}
}

func TestFileWritesAreAtomicUnderConcurrency(t *testing.T) {
	f, err := sink.NewFile(t.TempDir()) // real clock
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.PatchBrief(ctx, "T1", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	briefPath := filepath.Join(f.TaskDir("T1"), sink.BriefFile)
	const writers, each = 8, 15
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		reads := 0
		for {
			select {
			case <-stop:
				if reads == 0 {
					readerDone <- fmt.Errorf("reader never ran")
					return
				}
				readerDone <- nil
				return
			default:
			}
			b, err := os.ReadFile(briefPath)
			if err != nil {
				readerDone <- err
				return
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				readerDone <- fmt.Errorf("torn brief.json read: %v: %q", err, b)
				return
			}
			reads++
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := f.PatchBrief(ctx, "T1", json.RawMessage(fmt.Sprintf(`{"phases":{"w%d_%d":{"n":%d}}}`, w, i, i))); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	b, _ := f.Brief("T1")
	if n := len(b["phases"].(map[string]any)); n != writers*each {
		t.Fatalf("%d phases, want %d: a concurrent PATCH was lost", n, writers*each)
	}
	entries, _ := os.ReadDir(f.TaskDir("T1"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file left behind: %s", e.Name())
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, filepath.Join(f.TaskDir("T1"), sink.PatchesFile))))
	lines := 0
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("audit line %d is not JSON: %q", lines, sc.Text())
		}
		lines++
	}
	if lines != writers*each+1 {
		t.Fatalf("%d audit lines, want %d", lines, writers*each+1)
	}
}

func TestFileRejectsBadInput(t *testing.T) {
	root := t.TempDir()
	f, err := sink.NewFile(filepath.Join(root, "sink"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"", "..", "../escape", "a/b", `a\b`, "T.1", strings.Repeat("x", 65)} {
		if err := f.PatchBrief(ctx, id, json.RawMessage(`{}`)); karvi.KindOf(err) != karvi.KindBadRequest {
			t.Errorf("PatchBrief(%q) err = %v, want BadRequest", id, err)
		}
		if err := f.SetStatus(ctx, id, sink.StatusUpdate{Status: "in_progress"}); karvi.KindOf(err) != karvi.KindBadRequest {
			t.Errorf("SetStatus(%q) err = %v, want BadRequest", id, err)
		}
	}
	for _, body := range []string{`[1]`, `null`, `{"a":`, `"x"`} {
		if err := f.PatchBrief(ctx, "T1", json.RawMessage(body)); !karvi.IsPermanent(err) {
			t.Errorf("PatchBrief body %s err = %v, want a permanent BadRequest", body, err)
		}
	}
	if err := f.SetStatus(ctx, "T1", sink.StatusUpdate{Status: "done"}); karvi.KindOf(err) != karvi.KindBadRequest {
		t.Errorf("bogus status err = %v", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 || entries[0].Name() != "sink" {
		t.Fatalf("something was written outside the sink dir: %v", entries)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.PatchBrief(cctx, "T1", json.RawMessage(`{}`)); err == nil {
		t.Fatal("PatchBrief with a cancelled context succeeded")
	}
}

func TestFileStatusTransitions(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	statusPath := filepath.Join(f.TaskDir("T5"), sink.StatusFile)
	set := func(u sink.StatusUpdate) {
		t.Helper()
		if err := f.SetStatus(ctx, "T5", u); err != nil {
			t.Fatal(err)
		}
	}
	set(sink.StatusUpdate{Status: "dispatched", DispatchState: "dispatching", PlanID: "disp_001", PlanName: "karvi-t5"})
	set(sink.StatusUpdate{Status: "completed", DispatchState: "completed", PlanID: "disp_001", PlanName: "karvi-t5"})
	st, err := f.Status("T5")
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, h := range st.History {
		steps = append(steps, h.From+">"+h.Status)
	}
	if got := strings.Join(steps, " "); got != ">dispatched dispatched>in_progress in_progress>completed" {
		t.Fatalf("history %s: dispatched -> completed must pass through in_progress", got)
	}
	if st.Status != "completed" || st.Blocker != nil || st.Dispatch == nil || st.Dispatch.State != "completed" || st.Dispatch.LastError != nil || st.Dispatch.PlanName != "karvi-t5" {
		t.Fatalf("status %+v dispatch %+v", st, st.Dispatch)
	}
	if !strings.Contains(string(readFile(t, statusPath)), `"lastError": null`) {
		t.Fatalf("status.json should carry lastError null:\n%s", readFile(t, statusPath))
	}

	// Idempotent: the same update again writes nothing.
	before := readFile(t, statusPath)
	set(sink.StatusUpdate{Status: "completed", DispatchState: "completed", PlanID: "disp_001", PlanName: "karvi-t5"})
	if after := readFile(t, statusPath); !bytes.Equal(before, after) {
		t.Fatal("repeating the current status rewrote status.json")
	}

	// completed cannot go back to in_progress in karvi.
	err = f.SetStatus(ctx, "T5", sink.StatusUpdate{Status: "in_progress"})
	if !karvi.IsIllegalTransition(err) || karvi.IsRetryable(err) || !strings.Contains(err.Error(), "Invalid task status transition: completed -> in_progress") {
		t.Fatalf("illegal target err = %v", err)
	}
	if after := readFile(t, statusPath); !bytes.Equal(before, after) {
		t.Fatal("a refused transition changed status.json")
	}
}

func TestFileBlockedAndRedispatch(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	set := func(u sink.StatusUpdate) sink.TaskStatus {
		t.Helper()
		if err := f.SetStatus(ctx, "T5", u); err != nil {
			t.Fatal(err)
		}
		st, err := f.Status("T5")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	set(sink.StatusUpdate{Status: "in_progress"})
	st := set(sink.StatusUpdate{Status: "blocked", Reason: "Phase test failed: exit 1", AskedAt: "2026-02-28T03:10:00Z",
		DispatchState: "failed", LastError: "Phase test failed after 3 attempts: exit 1"})
	if st.Blocker == nil || *st.Blocker != (sink.Blocker{Reason: "Phase test failed: exit 1", AskedAt: "2026-02-28T03:10:00Z"}) {
		t.Fatalf("blocker = %+v", st.Blocker)
	}
	if st.Dispatch.State != "failed" || *st.Dispatch.LastError != "Phase test failed after 3 attempts: exit 1" {
		t.Fatalf("dispatch = %+v", st.Dispatch)
	}
	if last := st.History[len(st.History)-1]; last.Reason != "Phase test failed: exit 1" || last.At != "2026-02-28T03:10:00Z" {
		t.Fatalf("last history entry = %+v", last)
	}
	// Blocked again with a new reason updates the blocker only.
	st = set(sink.StatusUpdate{Status: "blocked", Reason: "Plan aborted by user", AskedAt: "2026-02-28T03:11:00Z"})
	if st.Blocker.Reason != "Plan aborted by user" || len(st.History) != 2 {
		t.Fatalf("blocker %+v, %d history entries", st.Blocker, len(st.History))
	}
	// Redispatch: blocked -> dispatched directly, blocker cleared.
	st = set(sink.StatusUpdate{Status: "dispatched", DispatchState: "dispatching"})
	if st.Status != "dispatched" || st.Blocker != nil || len(st.History) != 3 {
		t.Fatalf("after redispatch: %+v", st)
	}
}

// Both sinks take the same status sequence to the same place.
func TestFileAndKarviSinksAgreeOnStatus(t *testing.T) {
	f := newFile(t)
	fake := karvifake.New(karvifake.Options{Now: clock})
	_ = fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched"})
	url, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c, _ := karvi.New(url, "")
	ks := sink.NewKarvi(c)
	ctx := context.Background()
	seq := []sink.StatusUpdate{
		{Status: "dispatched"},
		{Status: "in_progress"},
		{Status: "blocked", Reason: "r1"},
		{Status: "dispatched"},
		{Status: "completed"},
		{Status: "in_progress"}, // illegal from completed, for both
	}
	for i, u := range seq {
		ferr, kerr := f.SetStatus(ctx, "T5", u), ks.SetStatus(ctx, "T5", u)
		if karvi.KindOf(ferr) != karvi.KindOf(kerr) {
			t.Fatalf("step %d (%s): file err %v, karvi err %v", i, u.Status, ferr, kerr)
		}
		fst, _ := f.Status("T5")
		kt, _ := fake.Task("T5")
		if fst.Status != kt.Status || (fst.Blocker == nil) != (kt.Blocker == nil) {
			t.Fatalf("step %d: file %+v, karvi %s %+v", i, fst, kt.Status, kt.Blocker)
		}
	}
	var walked []string
	for _, w := range fake.Writes("T5") {
		if strings.HasSuffix(w.Path, "/status") {
			var b map[string]any
			_ = json.Unmarshal(w.Body, &b)
			walked = append(walked, b["status"].(string))
		}
	}
	if got := strings.Join(walked, ","); got != "in_progress,blocked,dispatched,in_progress,completed" {
		t.Fatalf("karvi saw %s", got)
	}
}
