package jobview

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRunStateTagging(t *testing.T) {
	for _, tc := range []struct {
		state RunState
		json  string
	}{
		{Pending(), `{"status":"pending"}`},
		{Planning(), `{"status":"planning"}`},
		{Executing(2, "test"), `{"status":"executing","attempt":2,"step":"test"}`},
		{Verifying(2), `{"status":"verifying","attempt":2}`},
		{Succeeded(3, ""), `{"status":"succeeded","attempt":3,"diff_path":""}`},
		{Succeeded(1, "runs/T5/a.diff"), `{"status":"succeeded","attempt":1,"diff_path":"runs/T5/a.diff"}`},
		{Failed(1, "Phase test failed"), `{"status":"failed","attempts":1,"last_error":"Phase test failed"}`},
		{Cancelled(), `{"status":"cancelled"}`},
		// Fields of other variants are not written.
		{RunState{Status: StateCancelled, Attempt: 4, Step: "x"}, `{"status":"cancelled"}`},
	} {
		t.Run(tc.state.Status, func(t *testing.T) {
			got, err := json.Marshal(tc.state)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Fatalf("marshal: %s, want %s", got, tc.json)
			}
			var back RunState
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			want := tc.state
			if want.Status == StateCancelled {
				want = Cancelled()
			}
			if back != want {
				t.Errorf("round trip: %+v, want %+v", back, want)
			}
		})
	}
}

func TestRunStateRefusals(t *testing.T) {
	for _, tc := range []struct{ json, err string }{
		{`"executing"`, "not a JSON object"},
		{`{}`, "status: missing"},
		{`{"status":3}`, "status: must be a string"},
		{`{"status":"running"}`, `unknown status "running"`},
		{`{"status":"executing","attempt":1}`, "executing: step: missing"},
		{`{"status":"executing","attempt":"1","step":"x"}`, "executing: attempt:"},
		{`{"status":"failed","attempts":1,"last_error":null}`, "last_error: null"},
		{`{"status":"succeeded","diff_path":""}`, "attempt: missing"},
		{`{"status":"verifying","attempt":1`, "unexpected end"},
	} {
		var s RunState
		err := json.Unmarshal([]byte(tc.json), &s)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.err)
		}
	}
	// Members of other variants are ignored, as serde ignores unknown fields.
	var s RunState
	if err := json.Unmarshal([]byte(`{"status":"verifying","attempt":2,"step":"test","extra":true}`), &s); err != nil || s != Verifying(2) {
		t.Errorf("got %+v, %v", s, err)
	}
	if _, err := json.Marshal(RunState{Status: "running"}); err == nil {
		t.Error("an unknown status was marshalled")
	}
}

func TestAttemptResultTagging(t *testing.T) {
	out := "exit 1"
	v := &Verdict{Passed: false, TestResults: []TestResult{{Name: "test: cmd_succeeds `go test`", Status: TestFailed, DurationMS: 12, Output: &out}},
		Logs: []string{"test try 1 failed: exit 1"}, Artifacts: []string{}}
	for _, tc := range []struct {
		result AttemptResult
		json   string
	}{
		{AttemptResult{Status: ResultInProgress}, `{"status":"in_progress"}`},
		{AttemptResult{Status: ResultSucceeded}, `{"status":"succeeded"}`},
		{AttemptResult{Status: ResultVerificationFailed, Verdict: v},
			`{"status":"verification_failed","verdict":{"passed":false,"test_results":[{"name":"test: cmd_succeeds ` + "`go test`" +
				`","status":"failed","duration_ms":12,"output":"exit 1"}],"logs":["test try 1 failed: exit 1"],"artifacts":[]}}`},
		{AttemptResult{Status: ResultExecutionFailed, Step: "test", Error: "Phase test timed out"},
			`{"status":"execution_failed","step":"test","error":"Phase test timed out"}`},
		{AttemptResult{Status: ResultExecutionFailed, Error: "Conductor crashed: exit code 3"},
			`{"status":"execution_failed","step":"","error":"Conductor crashed: exit code 3"}`},
	} {
		t.Run(tc.result.Status, func(t *testing.T) {
			got, err := json.Marshal(tc.result)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Fatalf("marshal: %s, want %s", got, tc.json)
			}
			var back AttemptResult
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.result) {
				t.Errorf("round trip: %+v, want %+v", back, tc.result)
			}
		})
	}
	for _, tc := range []struct{ json, err string }{
		{`{"status":"verification_failed"}`, "verdict: missing"},
		{`{"status":"verification_failed","verdict":null}`, "verdict: null"},
		{`{"status":"execution_failed","step":"x"}`, "error: missing"},
		{`{"status":"cancelled"}`, `unknown status "cancelled"`},
		{`[]`, "not a JSON object"},
	} {
		var r AttemptResult
		if err := json.Unmarshal([]byte(tc.json), &r); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.err)
		}
	}
	if _, err := json.Marshal(AttemptResult{Status: ResultVerificationFailed}); err == nil {
		t.Error("verification_failed without a verdict was marshalled")
	}
}

// A whole job decodes back to itself: the tagged types nest in it.
func TestJobRoundTrip(t *testing.T) {
	job := loadExample(t, "B", "events.snake.jsonl").job(t)
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Errorf("job changed on the way back:\n%s\n%s", again, data)
	}
}
