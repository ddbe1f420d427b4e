package jobview

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"karvi-edda-temporal/mapping"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// example is one worked example of the contract: its plan, dispatch, event
// log and, when it has one, the conductor's final state.json.
type example struct {
	name     string
	plan     mapping.Plan
	dispatch mapping.DispatchPlan
	events   []byte
	state    []byte
}

func loadExample(t *testing.T, name, events string) example {
	t.Helper()
	dir := filepath.Join("..", "testdata", "examples", name)
	read := func(file string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return data
	}
	plan, err := mapping.ParsePlan(read("plan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := mapping.ParseDispatchPlan(read("dispatch.json"))
	if err != nil {
		t.Fatal(err)
	}
	return example{name: name, plan: plan, dispatch: d, events: read(events), state: read("state.json")}
}

// end is how the workflow would end the example's attempt: the terminal
// event's outcome, else state.json's, by the project's outcome rules.
func (ex example) end(t *testing.T) End {
	t.Helper()
	brief := mapping.NewBriefState(ex.dispatch.TaskID, ex.plan.Summary())
	var o *mapping.Outcome
	for _, line := range bytes.Split(bytes.TrimSpace(ex.events), []byte("\n")) {
		ev, err := mapping.ParseEvent(line)
		if err != nil {
			t.Fatal(err)
		}
		brief.Reduce(ev)
		if got, ok := mapping.OutcomeFromEvent(ev, brief); ok && o == nil {
			o = &got
		}
	}
	if o == nil {
		cs, err := mapping.ParseConductorState(ex.state)
		if err != nil {
			t.Fatal(err)
		}
		got := mapping.OutcomeFromState(cs, brief, nil)
		o = &got
	}
	return End{How: string(o.TaskStatus), Phase: o.PhaseID, ErrorType: o.ErrorType, Error: o.LastError}
}

// tally folds the example the way the worker does: the events, then the
// state.json it reads when the attempt ends.
func (ex example) tally(t *testing.T) *Tally {
	t.Helper()
	tl := NewTally(Seed{Plan: &ex.plan, Worktree: "/work/tasks/" + ex.dispatch.TaskID})
	if n := tl.ObserveLog(ex.events); n != 0 {
		t.Fatalf("%d malformed lines in example %s", n, ex.name)
	}
	if ex.state != nil {
		s, err := ParseState(ex.state)
		if err != nil {
			t.Fatal(err)
		}
		tl.ObserveState(s)
	}
	tl.Artifacts = []string{"/work/runs/T5/" + ex.plan.Name + "/metrics.json"}
	return tl
}

// job is the example as the job query answers it once the attempt ended,
// the workflow's clock standing at the conductor's first and last events.
func (ex example) job(t *testing.T) Job {
	t.Helper()
	tl := ex.tally(t).WithEnd(ex.end(t))
	start, err := time.Parse(time.RFC3339, tl.FirstTS)
	if err != nil {
		t.Fatal(err)
	}
	end, err := time.Parse(time.RFC3339, tl.LastTS)
	if err != nil {
		t.Fatal(err)
	}
	return BuildJob(JobInput{
		ID: ex.dispatch.TaskID, SpecID: ex.dispatch.PlanID, PlanID: ex.plan.Name, MaxAttempts: ex.plan.MaxAttempts,
		CreatedAt: start, UpdatedAt: end,
		Attempts: []AttemptInput{{Number: 1, ID: ex.plan.Name, StartedAt: start, FinishedAt: end, Tally: tl}},
	})
}

func TestGoldenExamples(t *testing.T) {
	for _, name := range []string{"A", "B"} {
		t.Run(name, func(t *testing.T) {
			ex := loadExample(t, name, "events.snake.jsonl")
			job := ex.job(t)
			golden(t, name+".job.json", mustJSON(t, job))
			golden(t, name+".report.txt", []byte(Report(job)))
			golden(t, name+".metrics.json", mustJSON(t, ex.tally(t).Metrics(ex.dispatch.TaskID, "")))

			// The document's casing (PascalCase, seq from 1) is the same job.
			pascal := loadExample(t, name, "events.pascal.jsonl").job(t)
			if got, want := mustJSON(t, pascal), mustJSON(t, job); !bytes.Equal(got, want) {
				t.Errorf("PascalCase events give another job:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// The golden files pin the mapping; these pin what it must mean.
func TestExamplesSayWhatTheyShould(t *testing.T) {
	a := loadExample(t, "A", "events.snake.jsonl").job(t)
	if a.State != Succeeded(1, "") || a.Attempts[0].Result.Status != ResultSucceeded {
		t.Errorf("A: state %+v, result %+v", a.State, a.Attempts[0].Result)
	}
	if got := a.Attempts[0].Verdict.Summary(); got != "3 passed, 0 failed, 3 total in 0ms" {
		t.Errorf("A: verdict %q", got)
	}
	if a.Metrics.Cost.TotalUSD != 1.45 || a.Metrics.Cost.ByModel[UnknownModel] != 1.45 || a.Metrics.RetryCount != 0 {
		t.Errorf("A: metrics %+v", a.Metrics)
	}
	if a.Metrics.TokenUsage != nil || a.Metrics.StepMetrics[0].Tokens != nil {
		t.Error("A: tokens were never reported, yet the metrics have some")
	}

	b := loadExample(t, "B", "events.snake.jsonl").job(t)
	want := Failed(1, "Phase test failed after 3 attempts: check failed: cmd `cargo test` exited 1")
	if b.State != want {
		t.Errorf("B: state %+v, want %+v", b.State, want)
	}
	r := b.Attempts[0].Result
	if r.Status != ResultVerificationFailed || r.Verdict == nil || r.Verdict.Passed {
		t.Fatalf("B: result %+v", r)
	}
	// Two tries known from their events, the third from state.json.
	if got := r.Verdict.Summary(); got != "1 passed, 3 failed, 4 total in 4140ms" {
		t.Errorf("B: verdict %q", got)
	}
	if b.Metrics.RetryCount != 2 {
		t.Errorf("B: retry count %d, want 2 (test ran 3 times)", b.Metrics.RetryCount)
	}
	if s := b.Metrics.StepMetrics; len(s) != 3 || s[1].Tries != 3 || s[1].Duration.Std() != 165*time.Second || s[2].Tries != 0 {
		t.Errorf("B: steps %+v", s)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./jobview -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s\nwant\n%s", name, got, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}
