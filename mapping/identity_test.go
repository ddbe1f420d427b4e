package mapping

import (
	"regexp"
	"testing"
)

func TestAttemptPlanNameCarriesTheChainNonce(t *testing.T) {
	n := AttemptNonce("karvi-task-t5", "0b5a0f6e-5c5d-4c1e-9a55-3d1c2a0f8e11")
	if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(n) {
		t.Fatalf("AttemptNonce = %q, want 8 hex digits", n)
	}
	if n != AttemptNonce("karvi-task-t5", "0b5a0f6e-5c5d-4c1e-9a55-3d1c2a0f8e11") {
		t.Fatal("AttemptNonce is not deterministic")
	}
	if n == AttemptNonce("karvi-task-t5", "7d1e7f2a-0000-4c1e-9a55-3d1c2a0f8e11") {
		t.Fatal("two workflow chains of one task share a nonce")
	}
	if AttemptNonce("", "") != "" {
		t.Fatal("no chain must give no nonce")
	}
	cases := []struct {
		id      string
		attempt int
		nonce   string
		want    string
	}{
		{"t5", 1, "", "karvi-t5"},
		{"t5", 2, "", "karvi-t5-r2"},
		{"t5", 1, "0a1b2c3d", "karvi-t5-r1-0a1b2c3d"},
		{"t5", 0, "0a1b2c3d", "karvi-t5-r1-0a1b2c3d"},
		{"t5", 3, "0a1b2c3d", "karvi-t5-r3-0a1b2c3d"},
		{"T5", 2, "0a1b2c3d", "karvi-t5-" + hash6("T5") + "-r2-0a1b2c3d"},
		// A task id ending the way a nonce does is hashed, so it never
		// reads as another task's attempt.
		{"t5-r1-0a1b2c3d", 1, "0a1b2c3d", "karvi-t5-r1-0a1b2c3d-" + hash6("t5-r1-0a1b2c3d") + "-r1-0a1b2c3d"},
	}
	for _, c := range cases {
		if got := AttemptPlanName(c.id, c.attempt, c.nonce); got != c.want {
			t.Errorf("AttemptPlanName(%q, %d, %q) = %q, want %q", c.id, c.attempt, c.nonce, got, c.want)
		}
	}
}

func TestAttemptPlanNamesNeverCollide(t *testing.T) {
	ids := []string{"T5", "t5", "t5-r2", "t5-r2-0a1b2c3d", "t5-r1-0a1b2c3d", "a_b", "a-b", "x", "0a1b2c3d", "t-0a1b2c3d"}
	nonces := []string{"", "0a1b2c3d", "ffffffff"}
	seen := map[string]string{}
	kebab := regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	for _, id := range ids {
		for _, nonce := range nonces {
			for attempt := 1; attempt <= 3; attempt++ {
				name := AttemptPlanName(id, attempt, nonce)
				if !kebab.MatchString(name) {
					t.Errorf("AttemptPlanName(%q,%d,%q) = %q is not kebab-case", id, attempt, nonce, name)
				}
				key := id + "#" + nonce + "#" + string(rune('0'+attempt))
				if prev, dup := seen[name]; dup {
					t.Errorf("collision: %s and %s both give %q", prev, key, name)
				}
				seen[name] = key
			}
		}
	}
}

func TestBuildAttemptPlanNamesThePlanWithTheNonce(t *testing.T) {
	d := fullDispatch(t)
	p, err := BuildAttemptPlan(d, 2, "0a1b2c3d", DefaultTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if want := AttemptPlanName(d.TaskID, 2, "0a1b2c3d"); p.Name != want {
		t.Fatalf("plan name %q, want %q", p.Name, want)
	}
}

func TestIsAttemptPlan(t *testing.T) {
	require := func(ok bool, msg string) {
		t.Helper()
		if !ok {
			t.Error(msg)
		}
	}
	require(IsAttemptPlan("karvi-t5", "t5", 1), "legacy attempt 1")
	require(IsAttemptPlan("karvi-t5-r2", "t5", 2), "legacy attempt 2")
	require(IsAttemptPlan(AttemptPlanName("t5", 2, "0a1b2c3d"), "t5", 2), "nonce attempt 2")
	require(!IsAttemptPlan(AttemptPlanName("t5", 2, "0a1b2c3d"), "t5", 1), "another attempt")
	require(!IsAttemptPlan(AttemptPlanName("t5", 1, "0a1b2c3d"), "t6", 1), "another task")
	require(!IsAttemptPlan("karvi-t5-r1-0A1B2C3D", "t5", 1), "not a nonce")
}
