package mapping

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func TestParseDispatchPlanFull(t *testing.T) {
	d, err := ParseDispatchPlan(mustReadFile(t, "../testdata/dispatch/full.json"))
	if err != nil {
		t.Fatalf("full dispatch plan rejected: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"kind", d.Kind, "task_dispatch"},
		{"version", d.Version, 1},
		{"planId", d.PlanID, "disp_abc123"},
		{"taskId", d.TaskID, "T5"},
		{"mode", d.Mode, "dispatch"},
		{"runtimeHint", d.RuntimeHint, "edda"},
		{"agentId", d.AgentID, "engineer_pro"},
		{"modelHint is nil", d.ModelHint == nil, true},
		{"timeoutSec", *d.TimeoutSec, 600},
		{"message", d.Message, "Add user authentication with JWT. Use middleware pattern."},
		{"artifacts", len(d.Artifacts), 1},
		{"artifact id", d.Artifacts[0].ID, "T3"},
		{"artifact title", d.Artifacts[0].Title, "Setup database"},
		{"artifact status", d.Artifacts[0].Status, "approved"},
		{"artifact summary", d.Artifacts[0].Summary, "PostgreSQL with JSONB, migrations in src/db/"},
		{"requiredSkills", len(d.RequiredSkills), 0},
		{"codexRole", d.CodexRole, "worker"},
		{"quality_threshold", *d.ControlsSnapshot.QualityThreshold, 70.0},
		{"auto_review", *d.ControlsSnapshot.AutoReview, true},
		{"auto_redispatch", *d.ControlsSnapshot.AutoRedispatch, false},
		{"auto_dispatch absent", d.ControlsSnapshot.AutoDispatch == nil, true},
		{"max_review_attempts", *d.ControlsSnapshot.MaxReviewAttempts, 3},
		{"EffectiveTimeoutSec", d.EffectiveTimeoutSec(), 600},
		{"EffectiveMaxAttempts", d.EffectiveMaxAttempts(), 3},
		{"IsRedispatch", d.IsRedispatch(), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// karviPlan is shaped like karvi 0.2.0's buildDispatchPlan output, with the
// fields the document does not list and nulls where karvi writes them.
const karviPlan = `{
  "kind": "task_dispatch", "version": 1, "planId": "disp_m1x2y3", "taskId": "T-12",
  "mode": "redispatch", "runtimeHint": "edda", "userId": "default", "agentId": "engineer_lite",
  "modelHint": "openai-codex/gpt-5.3-codex", "timeoutSec": 300, "sessionId": null,
  "message": "Fix the bug.\nLine two: with colon # and {{braces}}",
  "createdAt": "2026-02-28T03:00:00.000Z", "upstreamTaskIds": ["T-10", "T-11"],
  "artifacts": [
    {"id": "T-10", "title": "Schema", "status": "approved", "summary": "done", "payload": {"k": [1, 2]}, "output_ref": "runs/10.json"},
    {"id": "T-11", "title": "No reply yet", "status": "approved"}
  ],
  "requiredSkills": ["coding-agent", "gctx-workflow"], "codexRole": "worker",
  "controlsSnapshot": {"quality_threshold": 70, "auto_dispatch": false, "auto_review": true, "auto_redispatch": false, "max_review_attempts": 5},
  "injectedLessons": ["les_1"], "injectedLessonCount": 1,
  "runtimeSelection": {"chosen": "edda", "rationale": "caller_specified: edda"},
  "steps": null, "workingDir": null, "somethingNew": {"x": 1}
}`

func TestParseDispatchPlanKarviShape(t *testing.T) {
	d, err := ParseDispatchPlan([]byte(karviPlan))
	if err != nil {
		t.Fatalf("karvi-shaped plan rejected: %v", err)
	}
	if d.UserID != "default" || d.SessionID != "" || d.CreatedAt != "2026-02-28T03:00:00.000Z" {
		t.Errorf("userId/sessionId/createdAt = %q/%q/%q", d.UserID, d.SessionID, d.CreatedAt)
	}
	if strings.Join(d.UpstreamTaskIDs, ",") != "T-10,T-11" {
		t.Errorf("upstreamTaskIds = %v", d.UpstreamTaskIDs)
	}
	if string(d.Artifacts[0].Payload) != `{"k": [1, 2]}` || d.Artifacts[0].OutputRef != "runs/10.json" {
		t.Errorf("artifact payload/output_ref = %s / %q", d.Artifacts[0].Payload, d.Artifacts[0].OutputRef)
	}
	if d.Steps != nil || d.WorkingDir != "" {
		t.Errorf("null steps/workingDir should decode to zero values, got %s / %q", d.Steps, d.WorkingDir)
	}
	if string(d.InjectedLessons) != `["les_1"]` || !strings.Contains(string(d.RuntimeSelection), "caller_specified") {
		t.Errorf("injectedLessons/runtimeSelection = %s / %s", d.InjectedLessons, d.RuntimeSelection)
	}
	if *d.ModelHint != "openai-codex/gpt-5.3-codex" || !d.IsRedispatch() || d.EffectiveMaxAttempts() != 5 {
		t.Errorf("modelHint/mode/max attempts wrong: %+v", d)
	}
	// The decoded plan survives a JSON round trip (it is a workflow input).
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ParseDispatchPlan(b)
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	b2, _ := json.Marshal(d2)
	if string(b) != string(b2) {
		t.Errorf("round trip changed the plan:\n%s\n%s", b, b2)
	}
}

func TestParseDispatchPlanErrors(t *testing.T) {
	long := strings.Repeat("x", MaxMessageBytes+1)
	cases := []struct {
		name, in, field, problem string
	}{
		{"empty", ``, "", "empty input"},
		{"not json", `{"taskId":`, "", "not valid JSON"},
		{"garbage", `hello`, "", "not valid JSON"},
		{"array", `[1,2]`, "", "must be a JSON object, got array"},
		{"string", `"x"`, "", "must be a JSON object, got string"},
		{"null", `null`, "", "must be a JSON object, got null"},
		{"timeout string", `{"taskId":"T5","message":"m","timeoutSec":"600"}`, "timeoutSec", "must be a whole number, got string"},
		{"timeout fraction", `{"taskId":"T5","message":"m","timeoutSec":1.5}`, "timeoutSec", "whole number"},
		{"timeout huge", `{"taskId":"T5","message":"m","timeoutSec":1e30}`, "timeoutSec", "whole number"},
		{"taskId number", `{"taskId":5,"message":"m"}`, "taskId", "must be a string, got number"},
		{"message object", `{"taskId":"T5","message":{}}`, "message", "must be a string, got object"},
		{"artifacts object", `{"taskId":"T5","message":"m","artifacts":{}}`, "artifacts", "must be an array, got object"},
		{"artifact summary number", `{"taskId":"T5","message":"m","artifacts":[{"id":"a","summary":3}]}`, "artifacts.summary", "must be a string, got number"},
		{"max attempts bool", `{"taskId":"T5","message":"m","controlsSnapshot":{"max_review_attempts":true}}`, "controlsSnapshot.max_review_attempts", "must be a whole number, got boolean"},
		{"skills string", `{"taskId":"T5","message":"m","requiredSkills":"x"}`, "requiredSkills", "must be an array, got string"},
		{"skills of numbers", `{"taskId":"T5","message":"m","requiredSkills":[1]}`, "requiredSkills", "must be a string, got number"},
		{"taskId missing", `{"message":"m"}`, "taskId", "required"},
		{"taskId null", `{"taskId":null,"message":"m"}`, "taskId", "required"},
		{"taskId dots", `{"taskId":"..","message":"m"}`, "taskId", "must be 1-64"},
		{"taskId slash", `{"taskId":"a/b","message":"m"}`, "taskId", "must be 1-64"},
		{"taskId space", `{"taskId":"a b","message":"m"}`, "taskId", "must be 1-64"},
		{"taskId too long", `{"taskId":"` + strings.Repeat("a", 65) + `","message":"m"}`, "taskId", "must be 1-64"},
		{"message missing", `{"taskId":"T5"}`, "message", "required"},
		{"message blank", `{"taskId":"T5","message":" \n\t "}`, "message", "required"},
		{"message too long", `{"taskId":"T5","message":"` + long + `"}`, "message", "at most"},
		{"timeout negative", `{"taskId":"T5","message":"m","timeoutSec":-1}`, "timeoutSec", "negative"},
		{"timeout over a week", `{"taskId":"T5","message":"m","timeoutSec":604801}`, "timeoutSec", "exceeds"},
		{"mode", `{"taskId":"T5","message":"m","mode":"retry"}`, "mode", `"retry"`},
		{"artifact without id", `{"taskId":"T5","message":"m","artifacts":[{"id":"a"},{"summary":"s"}]}`, "artifacts[1].id", "required"},
		{"max attempts 0", `{"taskId":"T5","message":"m","controlsSnapshot":{"max_review_attempts":0}}`, "controlsSnapshot.max_review_attempts", "between 1 and 20"},
		{"max attempts 21", `{"taskId":"T5","message":"m","controlsSnapshot":{"max_review_attempts":21}}`, "controlsSnapshot.max_review_attempts", "between 1 and 20"},
		{"planId", `{"taskId":"T5","message":"m","planId":"a b"}`, "planId", "must be 1-128"},
		{"skill upper", `{"taskId":"T5","message":"m","skill":"Review"}`, "skill", "must match"},
		{"skill path", `{"taskId":"T5","message":"m","skill":"../x"}`, "skill", "must match"},
		{"empty required skill", `{"taskId":"T5","message":"m","requiredSkills":["a"," "]}`, "requiredSkills[1]", "must not be empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDispatchPlan([]byte(c.in))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want *FieldError, got %T %v", err, err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Problem, c.problem) {
				t.Errorf("got field %q problem %q; want field %q problem containing %q", fe.Field, fe.Problem, c.field, c.problem)
			}
			want := "dispatch plan: "
			if c.field != "" {
				want += c.field + ": "
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
			}
		})
	}
}

func TestTimeoutTypeErrorMessage(t *testing.T) {
	_, err := ParseDispatchPlan([]byte(`{"taskId":"T5","message":"m","timeoutSec":"x"}`))
	if err == nil || err.Error() != "dispatch plan: timeoutSec: must be a whole number, got string" {
		t.Fatalf("got %v", err)
	}
}

func TestParseDispatchPlanAccepts(t *testing.T) {
	cases := map[string]string{
		"minimal":            `{"taskId":"T5","message":"m"}`,
		"whitespace around":  " \n{\"taskId\":\"T5\",\"message\":\"m\"}\n ",
		"timeout zero":       `{"taskId":"T5","message":"m","timeoutSec":0}`,
		"timeout a week":     `{"taskId":"T5","message":"m","timeoutSec":604800}`,
		"mode dispatch":      `{"taskId":"T5","message":"m","mode":"dispatch"}`,
		"mode redispatch":    `{"taskId":"T5","message":"m","mode":"redispatch"}`,
		"taskId 64":          `{"taskId":"` + strings.Repeat("a", 64) + `","message":"m"}`,
		"taskId punctuation": `{"taskId":"a_b-C9","message":"m"}`,
		"planId colons dots": `{"taskId":"T5","message":"m","planId":"disp:1.2_x-y"}`,
		"skill":              `{"taskId":"T5","message":"m","skill":"review_2-x"}`,
		"max attempts 1":     `{"taskId":"T5","message":"m","controlsSnapshot":{"max_review_attempts":1}}`,
		"max attempts 20":    `{"taskId":"T5","message":"m","controlsSnapshot":{"max_review_attempts":20}}`,
		"message at limit":   `{"taskId":"T5","message":"` + strings.Repeat("x", MaxMessageBytes) + `"}`,
		"unknown fields":     `{"taskId":"T5","message":"m","future":[1,{"a":null}]}`,
		"artifact no sum":    `{"taskId":"T5","message":"m","artifacts":[{"id":"a","summary":null}]}`,
		"unicode message":    `{"taskId":"T5","message":"加入 JWT 認證 ✓"}`,
	}
	for name, in := range cases {
		if _, err := ParseDispatchPlan([]byte(in)); err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
		}
	}
}

func TestEffectiveDefaults(t *testing.T) {
	zero, five := 0, 5
	cases := []struct {
		d           DispatchPlan
		timeout, ma int
	}{
		{DispatchPlan{}, 300, 3},
		{DispatchPlan{TimeoutSec: &zero}, 300, 3},
		{DispatchPlan{TimeoutSec: &five, ControlsSnapshot: &Controls{}}, 5, 3},
		{DispatchPlan{ControlsSnapshot: &Controls{MaxReviewAttempts: &five}}, 300, 5},
	}
	for i, c := range cases {
		if got := c.d.EffectiveTimeoutSec(); got != c.timeout {
			t.Errorf("%d: timeout %d want %d", i, got, c.timeout)
		}
		if got := c.d.EffectiveMaxAttempts(); got != c.ma {
			t.Errorf("%d: max attempts %d want %d", i, got, c.ma)
		}
	}
}

func readFileForFuzz(path string) ([]byte, error) { return os.ReadFile(path) }

// A stall threshold must be shorter than the timeout it would come before,
// and the action one of three; each error names its field.
func TestDispatchStallFields(t *testing.T) {
	cases := []struct {
		name, json, err string
	}{
		{"threshold under the timeout", `{"taskId":"T5","message":"m","timeoutSec":60,"stallAfterSec":5,"onStall":"redispatch"}`, ""},
		{"threshold under the default timeout", `{"taskId":"T5","message":"m","stallAfterSec":299}`, ""},
		{"threshold equal to the timeout", `{"taskId":"T5","message":"m","timeoutSec":60,"stallAfterSec":60}`,
			"dispatch plan: stallAfterSec: 60 must be shorter than the timeout (timeoutSec 60): a phase silent that long times out first"},
		{"threshold past the default timeout", `{"taskId":"T5","message":"m","stallAfterSec":900}`,
			"dispatch plan: stallAfterSec: 900 must be shorter than the timeout (timeoutSec 300): a phase silent that long times out first"},
		{"threshold zero", `{"taskId":"T5","message":"m","stallAfterSec":0}`,
			"dispatch plan: stallAfterSec: 0 must be at least 1 (leave it out for the worker's threshold)"},
		{"unknown action", `{"taskId":"T5","message":"m","onStall":"kill"}`,
			`dispatch plan: onStall: "kill": want warn, redispatch or abort`},
	}
	for _, c := range cases {
		_, err := ParseDispatchPlan([]byte(c.json))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
	d, err := ParseDispatchPlan([]byte(`{"taskId":"T5","message":"m","timeoutSec":60,"stallAfterSec":5,"onStall":"abort"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.StallAfter() != 5*time.Second || d.OnStall != "abort" {
		t.Errorf("stall %s %q, want 5s abort", d.StallAfter(), d.OnStall)
	}
	if d, _ = ParseDispatchPlan([]byte(`{"taskId":"T5","message":"m"}`)); d.StallAfter() != 0 {
		t.Errorf("stall %s without the field, want 0", d.StallAfter())
	}
}
