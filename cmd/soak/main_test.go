package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/soak"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := parseConfig(nil, env(nil))
	if err != nil || cfg.duration != 10*time.Minute || cfg.scale != 60 || !strings.HasSuffix(cfg.out, "/.run/soak") {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	cfg, err = parseConfig(nil, env(map[string]string{"SOAK_DURATION": "3m", "SOAK_SEED": "8412", "SOAK_SCALE": "120", "SOAK_OUT": "/tmp/x"}))
	if err != nil || cfg.duration != 3*time.Minute || cfg.seed != 8412 || cfg.scale != 120 || cfg.out != "/tmp/x" {
		t.Fatalf("from the environment: %+v, %v", cfg, err)
	}
	cfg, err = parseConfig([]string{"-seed", "5", "-duration", "2m"}, env(map[string]string{"SOAK_SEED": "8412", "SOAK_DURATION": "3m"}))
	if err != nil || cfg.seed != 5 || cfg.duration != 2*time.Minute {
		t.Fatalf("flags over the environment: %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{env: map[string]string{"SOAK_DURATION": "30s"}, want: `duration "30s" (SOAK_DURATION): want a Go duration of at least 1m`},
		{env: map[string]string{"SOAK_DURATION": "ten"}, want: `duration "ten"`},
		{env: map[string]string{"SOAK_SEED": "x1"}, want: `seed "x1" (SOAK_SEED): want an integer`},
		{env: map[string]string{"SOAK_SCALE": "0.5"}, want: `scale "0.5" (SOAK_SCALE)`},
		{env: map[string]string{"SOAK_SCALE": "fast"}, want: `scale "fast"`},
		{args: []string{"extra"}, want: `unexpected argument "extra"`},
	} {
		_, err := parseConfig(tc.args, env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want an error containing %q", tc.env, tc.args, err, tc.want)
		}
	}
}

// TestMixMakesValidInputs: every task and run a mix draws is one the
// runtime accepts, so a soak never fails on its own inputs.
func TestMixMakesValidInputs(t *testing.T) {
	for seed := range int64(10) {
		m := soak.NewMix(seed, 3*time.Minute, 60)
		for _, st := range m.Steps {
			if st.Spec != nil {
				data, err := json.Marshal(dispatch(*st.Spec))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := mapping.ParseDispatchPlan(data); err != nil {
					t.Errorf("seed %d task %s: %v", seed, st.Spec.ID, err)
				}
			}
			if st.RunSpec != nil {
				data, err := runFile(*st.RunSpec)
				if err != nil {
					t.Fatal(err)
				}
				r, err := runplan.Parse(data)
				if err != nil {
					t.Errorf("seed %d run %s: %v", seed, st.Run, err)
					continue
				}
				if r.Slug != st.Run || len(r.Tasks) != len(st.RunSpec.Tasks) {
					t.Errorf("seed %d run %s: parsed as %s with %d tasks", seed, st.Run, r.Slug, len(r.Tasks))
				}
			}
		}
	}
}
