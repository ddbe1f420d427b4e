package intent

import (
	"strings"
	"testing"
)

func TestParseCondition(t *testing.T) {
	for _, c := range []struct {
		in, canon     string
		facts         Facts
		holds, needed bool
	}{
		{"task_completed", "task_completed", Facts{Runs: 1, Completed: true}, true, true},
		{"task_completed", "task_completed", Facts{Runs: 1}, false, true},
		{"runs>=3", "runs>=3", Facts{Runs: 3}, true, false},
		{" runs >= 3 ", "runs>=3", Facts{Runs: 2, Completed: true}, false, false},
		{"any_of(task_completed, runs>=5)", "any_of(task_completed, runs>=5)", Facts{Runs: 5}, true, true},
		{"any_of(task_completed,runs>=5)", "any_of(task_completed, runs>=5)", Facts{Runs: 4}, false, true},
		{"all_of(task_completed, runs>=2)", "all_of(task_completed, runs>=2)", Facts{Runs: 1, Completed: true}, false, true},
		{"ALL_OF(Task_Completed, runs>=2)", "all_of(task_completed, runs>=2)", Facts{Runs: 2, Completed: true}, true, true},
		{"any_of(all_of(runs>=2, runs>=3), task_completed)", "any_of(all_of(runs>=2, runs>=3), task_completed)", Facts{Runs: 3}, true, true},
	} {
		cond, err := ParseCondition(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if cond.String() != c.canon {
			t.Errorf("%q reads back as %q, want %q", c.in, cond.String(), c.canon)
		}
		if got := cond.Holds(c.facts); got != c.holds {
			t.Errorf("%q with %+v: %v", c.in, c.facts, got)
		}
		if got := cond.NeedsOutcome(); got != c.needed {
			t.Errorf("%q needs the outcome: %v", c.in, got)
		}
	}
	for _, none := range []string{"", "  ", "none"} {
		if c, err := ParseCondition(none); c != nil || err != nil {
			t.Errorf("%q: %v %v", none, c, err)
		}
	}
}

func TestParseConditionErrors(t *testing.T) {
	deep := strings.Repeat("any_of(", 9) + "task_completed" + strings.Repeat(")", 9)
	for in, want := range map[string]string{
		"done":                      `unknown predicate "done"`,
		"runs":                      "runs wants >=N",
		"runs>=":                    "runs>= wants a whole number",
		"runs>=0":                   "N must be between 1 and 1000000",
		"runs>=1000001":             "N must be between 1",
		"any_of()":                  `unexpected ")"`,
		"any_of(task_completed":     "any_of: want , or )",
		"all_of task_completed":     "all_of wants (conditions, ...)",
		"task_completed)":           `unexpected ")"`,
		"task_completed, runs>=2":   `unexpected ", runs>=2"`,
		"any_of(task_completed,)":   `at 23: unexpected ")"`,
		"any_of(":                   "missing condition",
		deep:                        "nested deeper than 8",
		strings.Repeat("x", 2000):   "longer than 1024",
		"task_completed(runs>=2)":   `unexpected "(runs>=2)"`,
		"runs>=2 runs>=3":           `unexpected "runs>=3"`,
		"any_of(runs>=2; runs>=3)":  "want , or )",
		"any_of(task_completed, ?)": `unexpected "?"`,
	} {
		c, err := ParseCondition(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v %v, want an error containing %q", in, c, err, want)
		}
	}
}

func TestConditionValidateRejectsBadShapes(t *testing.T) {
	for _, c := range []Condition{
		{Kind: "maybe"},
		{Kind: CondAllOf},
		{Kind: CondRuns},
		{Kind: CondTaskCompleted, N: 2},
		{Kind: CondAnyOf, Of: []Condition{{Kind: CondRuns, N: -1}}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if (Condition{Kind: CondAllOf}).Holds(Facts{Runs: 9, Completed: true}) {
		t.Error("an empty all_of must not hold")
	}
}
