package jobview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/mapping"
)

// Folding a log in pieces, the tally going through JSON at every
// checkpoint as it does through workflow history, and some pieces read
// twice (a delivery taken up again from its checkpoint), gives the tally of
// one pass.
func TestIncrementalEqualsOnePass(t *testing.T) {
	ex := loadExample(t, "B", "events.snake.jsonl")
	state, err := ParseState(ex.state)
	if err != nil {
		t.Fatal(err)
	}
	one := NewTally(Seed{Plan: &ex.plan})
	one.ObserveLog(ex.events)
	one.ObserveState(state)
	want := mustJSON(t, one)

	evs := parseLog(t, ex.events)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		tl := NewTally(Seed{Plan: &ex.plan})
		for i := 0; i < len(evs); {
			n := 1 + rng.IntN(4)
			from := max(i-rng.IntN(3), 0) // re-read up to two lines
			for _, ev := range evs[from:min(i+n, len(evs))] {
				tl.Observe(ev)
			}
			i = min(i+n, len(evs))
			if rng.IntN(3) == 0 {
				tl.ObserveState(state) // a snapshot ahead of the events
			}
			var back Tally
			if err := json.Unmarshal(mustJSON(t, tl), &back); err != nil {
				t.Fatal(err)
			}
			tl = &back
		}
		tl.ObserveState(state)
		if got := mustJSON(t, tl); !bytes.Equal(got, want) {
			t.Fatalf("round %d: incremental tally\n%s\nwant\n%s", round, got, want)
		}
	}
}

func parseLog(t *testing.T, data []byte) []mapping.Event {
	t.Helper()
	var evs []mapping.Event
	off := 0
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			ev, err := mapping.ParseEvent(line)
			if err != nil {
				t.Fatal(err)
			}
			ev.Pos = mapping.Position{Offset: int64(off)}
			evs = append(evs, ev)
		}
		off += len(line)
	}
	return evs
}

// events makes a log from compact lines, one per event.
func events(t *testing.T, lines ...string) []byte {
	t.Helper()
	return []byte(strings.Join(lines, "\n") + "\n")
}

func testPlan(t *testing.T) *mapping.Plan {
	t.Helper()
	p, err := mapping.ParsePlan([]byte(`name: p
phases:
  - id: implement
    prompt: x
    check:
      - type: git_clean
  - id: test
    prompt: x
    depends_on: [implement]
    check:
      - type: file_exists
        path: go.mod
      - type: cmd_succeeds
        cmd: go test ./...
  - id: docs
    prompt: x
    depends_on: [test]
`))
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestVerdictCases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		log   []string
		state string
		want  []string // name status duration output
	}{
		{
			name: "a crash runs no check; the retry passes",
			log: []string{
				`{"type":"phase_start","phase_id":"implement","attempt":1}`,
				`{"type":"phase_failed","phase_id":"implement","attempt":1,"error":"agent crashed","error_type":"agent_crash"}`,
				`{"type":"phase_start","phase_id":"implement","attempt":2}`,
				`{"type":"phase_passed","phase_id":"implement","attempt":2,"duration_ms":10}`,
			},
			want: []string{"implement: git_clean (try 2) passed 0 -"},
		},
		{
			name: "a check failure names the only cmd_succeeds check",
			log: []string{
				`{"type":"phase_start","phase_id":"test","attempt":1}`,
				`{"type":"phase_failed","phase_id":"test","attempt":1,"error":"cmd ` + "`go test ./...`" + ` exited 1","error_type":"check_failed"}`,
			},
			want: []string{"test: cmd_succeeds `go test ./...` failed 0 cmd `go test ./...` exited 1"},
		},
		{
			name: "state.json gives each check, waiting ones skipped",
			log: []string{
				`{"type":"phase_start","phase_id":"test","attempt":1}`,
				`{"type":"phase_failed","phase_id":"test","attempt":1,"error":"check failed: no go.mod"}`,
			},
			state: `{"plan_status":"blocked","phases":[{"id":"test","status":"failed","attempts":1,"checks":[
				{"check_type":"file_exists","status":"failed","detail":"no go.mod","duration_ms":2},
				{"check_type":"cmd_succeeds","status":"waiting","duration_ms":0}]}]}`,
			want: []string{"test: file_exists go.mod failed 2 no go.mod", "test: cmd_succeeds `go test ./...` skipped 0 -"},
		},
		{
			name: "a skipped phase skips its checks; a phase without checks has none",
			log: []string{
				`{"type":"phase_skipped","phase_id":"test","reason":"not needed"}`,
				`{"type":"phase_start","phase_id":"docs","attempt":1}`,
				`{"type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":5}`,
			},
			want: []string{"test: file_exists go.mod skipped 0 not needed", "test: cmd_succeeds `go test ./...` skipped 0 not needed"},
		},
		{
			name: "a try still running has no result yet",
			log:  []string{`{"type":"phase_start","phase_id":"implement","attempt":1}`},
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTally(Seed{Plan: testPlan(t)})
			if n := tl.ObserveLog(events(t, tc.log...)); n != 0 {
				t.Fatalf("%d malformed", n)
			}
			if tc.state != "" {
				s, err := ParseState([]byte(tc.state))
				if err != nil {
					t.Fatal(err)
				}
				tl.ObserveState(s)
			}
			var got []string
			for _, r := range tl.Verdict(false).TestResults {
				out := "-"
				if r.Output != nil {
					out = *r.Output
				}
				got = append(got, fmt.Sprintf("%s %s %d %s", r.Name, r.Status, r.DurationMS, out))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("results\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// Without the plan (it could not be read), each phase stands for its
// checks.
func TestVerdictWithoutThePlan(t *testing.T) {
	tl := NewTally(Seed{PhaseIDs: []string{"implement", "test"}})
	tl.ObserveLog(events(t,
		`{"type":"phase_start","phase_id":"implement","attempt":1}`,
		`{"type":"phase_passed","phase_id":"implement","attempt":1}`,
		`{"type":"phase_start","phase_id":"test","attempt":1}`,
		`{"type":"phase_failed","phase_id":"test","attempt":1,"error":"check failed: exit 1"}`,
	))
	v := tl.Verdict(false)
	if got := v.Summary(); got != "1 passed, 1 failed, 2 total in 0ms" {
		t.Errorf("%s", got)
	}
	if v.TestResults[0].Name != "implement" || v.TestResults[1].Name != "test" {
		t.Errorf("names %+v", v.TestResults)
	}
}

// state.json shows a phase checking: the job is verifying until the next
// event of that phase; a snapshot of an older try says nothing.
func TestVerifyingComesFromTheSnapshot(t *testing.T) {
	tl := NewTally(Seed{Plan: testPlan(t)})
	tl.ObserveLog(events(t, `{"type":"phase_start","phase_id":"test","attempt":2}`))
	checking := func(attempts int) State {
		return State{Phases: []StatePhase{{ID: "test", Status: "checking", Attempts: attempts}}}
	}
	tl.ObserveState(checking(1))
	if tl.Verifying {
		t.Fatal("a snapshot of try 1 made try 2 verifying")
	}
	tl.ObserveState(checking(2))
	if !tl.Verifying {
		t.Fatal("not verifying")
	}
	state := func() RunState {
		return runState([]AttemptInput{{Number: 1, Tally: tl}})
	}
	if got := state(); got != Verifying(1) {
		t.Errorf("state %+v", got)
	}
	tl.Observe(mapping.Event{Pos: mapping.Position{Offset: 1000}, Type: mapping.EventPhasePassed, PhaseID: "test", Attempt: 2})
	if got := state(); got != Executing(1, "test") {
		t.Errorf("after the pass: %+v", got)
	}
}

func TestRunStates(t *testing.T) {
	running := NewTally(Seed{})
	running.Observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "docs", Attempt: 1})
	ended := func(how, errType, msg string) *Tally {
		return running.WithEnd(End{How: how, Phase: "docs", ErrorType: errType, Error: msg})
	}
	for _, tc := range []struct {
		name     string
		attempts []AttemptInput
		want     RunState
		result   string
	}{
		{"no attempt", nil, Pending(), ""},
		{"plan being written", []AttemptInput{{Number: 1, Planning: true}}, Planning(), ResultInProgress},
		{"conductor started, no phase yet", []AttemptInput{{Number: 1, Tally: NewTally(Seed{})}}, Planning(), ResultInProgress},
		{"a phase runs", []AttemptInput{{Number: 2, Tally: running}}, Executing(2, "docs"), ResultInProgress},
		{"completed", []AttemptInput{{Number: 2, Tally: ended(EndCompleted, "", "")}}, Succeeded(2, ""), ResultSucceeded},
		{"blocked by a check", []AttemptInput{{Number: 1, Tally: ended(EndBlocked, mapping.ErrCheckFailed, "Phase docs failed")}},
			Failed(1, "Phase docs failed"), ResultVerificationFailed},
		{"blocked by a timeout", []AttemptInput{{Number: 1, Tally: ended(EndBlocked, mapping.ErrTimeout, "Phase docs timed out")}},
			Failed(1, "Phase docs timed out"), ResultExecutionFailed},
		{"aborted", []AttemptInput{{Number: 1, Tally: ended(EndAborted, mapping.ErrUserAbort, mapping.MsgUserAbort)}},
			Cancelled(), ResultExecutionFailed},
		{"redispatched, next attempt not yet begun", []AttemptInput{{Number: 1, Tally: ended(EndRedispatched, "", "")}},
			Planning(), ResultExecutionFailed},
		{"ended before its conductor started", []AttemptInput{{Number: 1, Tally: (*Tally)(nil).WithEnd(End{How: EndBlocked, Error: "Conductor crashed: no edda"})}},
			Failed(1, "Conductor crashed: no edda"), ResultExecutionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := BuildJob(JobInput{ID: "T1", Attempts: tc.attempts})
			if job.State != tc.want {
				t.Errorf("state %+v, want %+v", job.State, tc.want)
			}
			if tc.result != "" && job.Attempts[len(job.Attempts)-1].Result.Status != tc.result {
				t.Errorf("result %+v, want %s", job.Attempts[len(job.Attempts)-1].Result, tc.result)
			}
		})
	}
}

func TestExecutionFailedWording(t *testing.T) {
	running := NewTally(Seed{})
	running.Observe(mapping.Event{Type: mapping.EventPhaseStart, PhaseID: "test", Attempt: 1})
	for how, want := range map[string]AttemptResult{
		EndRedispatched: {Status: ResultExecutionFailed, Step: "test", Error: "Redispatched before the attempt finished"},
		EndAborted:      {Status: ResultExecutionFailed, Step: "test", Error: mapping.MsgUserAbort},
	} {
		tl := running.WithEnd(End{How: how})
		if got := result(tl, tl.Verdict(false)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", how, got, want)
		}
	}
}

// Tokens and costs: a line's model wins, then the dispatch's, then
// "unknown"; the job adds its attempts up and counts each redispatch as a
// retry.
func TestMetricsAcrossAttemptsAndModels(t *testing.T) {
	first := NewTally(Seed{Plan: testPlan(t), Model: "sonnet"})
	first.ObserveLog(events(t,
		`{"ts":"2026-01-01T00:00:00Z","type":"phase_start","phase_id":"implement","attempt":1}`,
		`{"ts":"2026-01-01T00:00:10Z","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":10000,"cost_usd":0.1,"input_tokens":100,"output_tokens":20}`,
		`{"ts":"2026-01-01T00:00:11Z","type":"phase_start","phase_id":"test","attempt":1}`,
		`{"ts":"2026-01-01T00:00:20Z","type":"phase_failed","phase_id":"test","attempt":1,"duration_ms":9000,"cost_usd":0.2,"usage":{"tokens_in":50,"tokens_out":5,"model":"opus"}}`,
		`{"ts":"2026-01-01T00:00:21Z","type":"phase_start","phase_id":"test","attempt":2}`,
	))
	second := NewTally(Seed{Plan: testPlan(t)})
	second.ObserveLog(events(t,
		`{"ts":"2026-01-01T00:01:00Z","type":"phase_start","phase_id":"implement","attempt":1}`,
		`{"ts":"2026-01-01T00:01:05Z","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":5000,"cost_usd":0.05}`,
	))
	am := first.Metrics("T1", "")
	if am.TotalTime.Std() != 21*time.Second || am.RetryCount != 1 {
		t.Errorf("attempt metrics %+v", am)
	}
	if got := am.TokenUsage; !reflect.DeepEqual(got, []TokenUsage{{"sonnet", 100, 20}, {"opus", 50, 5}}) {
		t.Errorf("tokens %+v", got)
	}
	if am.StepMetrics[1].Tokens == nil || am.StepMetrics[1].Tokens.Model != "opus" || am.StepMetrics[2].Tokens != nil {
		t.Errorf("step tokens %+v", am.StepMetrics)
	}

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := BuildJob(JobInput{ID: "T1", Model: "haiku", CreatedAt: start, UpdatedAt: start.Add(time.Minute),
		Attempts: []AttemptInput{
			{Number: 1, StartedAt: start, FinishedAt: start.Add(30 * time.Second), Tally: first.WithEnd(End{How: EndRedispatched})},
			{Number: 2, StartedAt: start.Add(30 * time.Second), FinishedAt: start.Add(70 * time.Second), Tally: second.WithEnd(End{How: EndCompleted})},
		}})
	m := job.Metrics
	if m.TotalTime.Std() != 70*time.Second {
		t.Errorf("total time %v", m.TotalTime.Std())
	}
	wantCost := CostEstimate{TotalUSD: 0.35, ByModel: map[string]float64{"sonnet": 0.1, "opus": 0.2, "haiku": 0.05}}
	if !reflect.DeepEqual(m.Cost, wantCost) {
		t.Errorf("cost %+v, want %+v", m.Cost, wantCost)
	}
	if m.RetryCount != 2 {
		t.Errorf("retries %d: one try of test, one redispatch", m.RetryCount)
	}
	if s := m.StepMetrics[0]; s.StepID != "implement" || s.Tries != 2 || s.Duration.Std() != 15*time.Second || s.CostUSD != 0.15 {
		t.Errorf("implement over both attempts: %+v", s)
	}
	if job.Config.ExecutorModel == nil || *job.Config.ExecutorModel != "haiku" || job.Config.PlannerModel != nil {
		t.Errorf("config %+v", job.Config)
	}
}

// Whatever the conductor writes, the tally stays small enough for history.
func TestTallyStaysBounded(t *testing.T) {
	tl := NewTally(Seed{})
	long := strings.Repeat("x", 10000)
	for i := range 5000 {
		ev := mapping.Event{Pos: mapping.Position{Offset: int64(i)}, Type: mapping.EventPhaseFailed,
			PhaseID: fmt.Sprintf("p%d", i%100), Attempt: i, Error: "check failed: " + long,
			Usage: &mapping.Usage{Model: fmt.Sprintf("m%d", i%50), InputTokens: 1}}
		tl.Observe(ev)
	}
	data := mustJSON(t, tl)
	if len(data) > 2<<20 {
		t.Errorf("tally of %d bytes", len(data))
	}
	if len(tl.Phases) != maxPhases || len(tl.Usage) != maxModels+1 || len(tl.Logs) != maxLogs {
		t.Errorf("%d phases, %d models, %d logs", len(tl.Phases), len(tl.Usage), len(tl.Logs))
	}
	if p := tl.Phases[0]; len(p.Tries) != maxTries || p.TryCount != 50 {
		t.Errorf("phase p0: %d tries kept of %d", len(p.Tries), p.TryCount)
	}
	v := tl.Verdict(false)
	if len(v.TestResults) != maxResults {
		t.Errorf("%d test results", len(v.TestResults))
	}
	for _, r := range v.TestResults {
		if r.Output != nil && len(*r.Output) > MaxOutputBytes {
			t.Fatalf("output of %d bytes", len(*r.Output))
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	ex := loadExample(t, "B", "events.snake.jsonl")
	tl := ex.tally(t)
	before := mustJSON(t, tl)
	c := tl.Clone()
	c.Phases[1].Tries[2].Checks[0].Status = "changed"
	c.Phases[0].Checks[0] = "changed"
	c.Logs[0] = "changed"
	c.Artifacts[0] = "changed"
	c.Observe(mapping.Event{Pos: mapping.Position{Offset: 1 << 40}, Type: mapping.EventPhaseStart, PhaseID: "docs", Attempt: 1})
	if !bytes.Equal(mustJSON(t, tl), before) {
		t.Error("changing the clone changed the original")
	}
}

// A failed try's cost is only in the plan's total: the job's cost is the
// total, the difference counted as the default model's; steps keep what
// their events reported.
func TestThePlanTotalCoversFailedTries(t *testing.T) {
	tl := NewTally(Seed{Plan: testPlan(t), Model: "sonnet"})
	tl.ObserveLog(events(t,
		`{"type":"phase_start","phase_id":"implement","attempt":1}`,
		`{"type":"phase_failed","phase_id":"implement","attempt":1,"error":"check failed: dirty"}`,
		`{"type":"phase_start","phase_id":"implement","attempt":2}`,
		`{"type":"phase_passed","phase_id":"implement","attempt":2,"cost_usd":0.1,"usage":{"input_tokens":1,"model":"opus"}}`,
		`{"type":"plan_completed","phases_passed":1,"total_cost_usd":0.3}`,
	))
	m := tl.Metrics("T1", "")
	want := CostEstimate{TotalUSD: 0.3, ByModel: map[string]float64{"opus": 0.1, "sonnet": 0.2}}
	if !reflect.DeepEqual(m.Cost, want) || m.StepMetrics[0].CostUSD != 0.1 {
		t.Errorf("cost %+v, steps %+v", m.Cost, m.StepMetrics)
	}
}
