package mapping

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// -update rewrites the golden files under testdata/examples from the code.
// Review every regenerated file against docs/contract.md by hand before
// committing.
var update = flag.Bool("update", false, "rewrite golden files in testdata/examples")

const examplesDir = "../testdata/examples"

// replay parses an events file, giving each event the byte offset of its
// line as its position, and folds it into a fresh brief state.
func replay(t *testing.T, st *BriefState, path string) ([]Patch, []Event) {
	t.Helper()
	data := mustReadFile(t, path)
	var patches []Patch
	var events []Event
	var off int64
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		pos := Position{Offset: off}
		off += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := ParseEvent(line)
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos.Offset, err)
		}
		ev.Pos = pos
		events = append(events, ev)
		if p, ok := apply(st, ev); ok {
			patches = append(patches, p)
		}
	}
	return patches, events
}

type exampleRun struct {
	plan     []byte
	init     []byte
	patches  []byte
	brief    []byte
	terminal []byte
	bodies   []json.RawMessage
}

func runExample(t *testing.T, dir, casing string) exampleRun {
	t.Helper()
	d, err := ParseDispatchPlan(mustReadFile(t, filepath.Join(dir, "dispatch.json")))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	var r exampleRun
	if r.plan, err = MarshalPlan(plan); err != nil {
		t.Fatal(err)
	}
	summary := plan.Summary()
	st := NewBriefState(d.TaskID, summary)
	r.init = append(indentJSON(t, st.initPatch().Body), '\n')
	patches, events := replay(t, &st, filepath.Join(dir, "events."+casing+".jsonl"))
	var buf bytes.Buffer
	for _, p := range patches {
		buf.Write(p.Body)
		buf.WriteByte('\n')
		r.bodies = append(r.bodies, p.Body)
	}
	r.patches = buf.Bytes()
	r.brief = append(marshalIndent(t, st.Brief), '\n')

	last := events[len(events)-1]
	out, ok := OutcomeFromEvent(last, st)
	if !ok {
		cs, err := ParseConductorState(mustReadFile(t, filepath.Join(dir, "state.json")))
		if err != nil {
			t.Fatal(err)
		}
		out = OutcomeFromState(cs, st, summary.BudgetUSD)
	}
	r.terminal = append(marshalIndent(t, out), '\n')
	return r
}

func marshalIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestGoldenExamples(t *testing.T) {
	for _, ex := range []string{"A", "B"} {
		dir := filepath.Join(examplesDir, ex)
		pascal := runExample(t, dir, "pascal")
		snake := runExample(t, dir, "snake")
		files := []struct {
			name       string
			got, other []byte
		}{
			{"plan.yaml", pascal.plan, snake.plan},
			{"init_patch.json", pascal.init, snake.init},
			{"patches.jsonl", pascal.patches, snake.patches},
			{"brief.json", pascal.brief, snake.brief},
			{"terminal.json", pascal.terminal, snake.terminal},
		}
		for _, f := range files {
			if !bytes.Equal(f.got, f.other) {
				t.Errorf("%s/%s differs between PascalCase and snake_case events:\n%s\n---\n%s", ex, f.name, f.got, f.other)
			}
			path := filepath.Join(dir, f.name)
			if *update {
				if err := os.WriteFile(path, f.got, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want := mustReadFile(t, path)
			if !bytes.Equal(f.got, want) {
				t.Errorf("%s/%s does not match the golden file (run go test ./mapping -run TestGoldenExamples -update and review):\n got:\n%s\nwant:\n%s", ex, f.name, f.got, want)
			}
		}
	}
}

// Every field and value the abridged PATCH listing of an example shows must
// be in the patch we produce at the same position (we add what the listing
// leaves out: startedAt, attempts on pass, by_phase, log).
func TestGoldenContainsAbridgedListing(t *testing.T) {
	for _, ex := range []string{"A", "B"} {
		dir := filepath.Join(examplesDir, ex)
		run := runExample(t, dir, "snake")
		listed := readLines(t, filepath.Join(dir, "abridged_patches.jsonl"))
		if len(listed) != len(run.bodies) {
			t.Fatalf("%s: the listing has %d patches, we produce %d", ex, len(listed), len(run.bodies))
		}
		for i := range listed {
			var want, got any
			if err := json.Unmarshal(listed[i], &want); err != nil {
				t.Fatalf("%s listed patch %d: %v", ex, i+1, err)
			}
			if err := json.Unmarshal(run.bodies[i], &got); err != nil {
				t.Fatal(err)
			}
			if path, ok := subset(want, got, ""); !ok {
				t.Errorf("%s PATCH %d: listed value at %s missing or different\nlisted: %s\n   got: %s", ex, i+1, path, listed[i], run.bodies[i])
			}
		}
	}
}

// subset reports whether every key/value of want appears in got; objects
// compare key by key, everything else by equality.
func subset(want, got any, path string) (string, bool) {
	wm, ok := want.(map[string]any)
	if !ok {
		return path, reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return path, false
	}
	for k, wv := range wm {
		gv, present := gm[k]
		if !present {
			return path + "." + k, false
		}
		if p, ok := subset(wv, gv, path+"."+k); !ok {
			return p, false
		}
	}
	return "", true
}

func TestSubsetCanFail(t *testing.T) {
	var a, b any
	_ = json.Unmarshal([]byte(`{"phases":{"x":{"status":"passed"}}}`), &a)
	_ = json.Unmarshal([]byte(`{"phases":{"x":{"status":"failed","attempts":1}}}`), &b)
	if p, ok := subset(a, b, ""); ok || p != ".phases.x.status" {
		t.Errorf("subset accepted a different value (%q)", p)
	}
	if _, ok := subset(b, a, ""); ok {
		t.Error("subset accepted a missing key")
	}
	if _, ok := subset(a, a, ""); !ok {
		t.Error("subset rejected itself")
	}
}

// The terminal states of examples A and B (docs/contract.md §10), checked
// field by field so a regenerated golden cannot quietly change them.
func TestGoldenTerminalMatchesExamples(t *testing.T) {
	var a, b Outcome
	if err := json.Unmarshal(mustReadFile(t, filepath.Join(examplesDir, "A", "terminal.json")), &a); err != nil {
		t.Fatal(err)
	}
	if a.Code != 0 || a.TaskStatus != "completed" || a.DispatchState != "completed" {
		t.Errorf("example A terminal %+v", a)
	}
	if err := json.Unmarshal(mustReadFile(t, filepath.Join(examplesDir, "B", "terminal.json")), &b); err != nil {
		t.Fatal(err)
	}
	if b.Code != 1 || b.TaskStatus != "blocked" || b.DispatchState != "failed" ||
		b.BlockerReason != "Phase test failed: cmd `cargo test` exited 1" ||
		!strings.HasPrefix(b.LastError, "Phase test failed after 3 attempts") ||
		!strings.HasSuffix(b.LastError, "cmd `cargo test` exited 1") {
		t.Errorf("example B terminal %+v", b)
	}
}

// The plan golden of the full dispatch: the default template with an
// upstream artifact as context (docs/contract.md §3.3).
func TestFullDispatchPlan(t *testing.T) {
	d := fullDispatch(t)
	p, err := BuildPlan(d, 1, DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	y, err := MarshalPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "testdata", "dispatch", "full.plan.yaml")
	if *update {
		if err := os.WriteFile(path, y, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := mustReadFile(t, path); !bytes.Equal(y, want) {
		t.Errorf("full dispatch plan:\n%s\nwant:\n%s", y, want)
	}
}
