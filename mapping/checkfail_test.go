package mapping

import "testing"

func TestDescribeCheckFailure(t *testing.T) {
	cargo := Check{Type: CheckCmdSucceeds, Cmd: "cargo test"}
	cases := []struct {
		name  string
		check Check
		in    string
		want  string
	}{
		{"edda 0.3 bare", cargo, "exit 1:", "cmd `cargo test` exited 1"},
		{"edda 0.3 with stderr", cargo, "exit 101: test auth::jwt failed", "cmd `cargo test` exited 101: test auth::jwt failed"},
		{"prefix kept", cargo, "check failed: exit 1:", "check failed: cmd `cargo test` exited 1"},
		{"multi-line stderr", cargo, "exit 2: line one\nline two", "cmd `cargo test` exited 2: line one\nline two"},
		{"already in our wording", cargo, "check failed: cmd `cargo test` exited 1", "check failed: cmd `cargo test` exited 1"},
		{"timeout text unchanged", cargo, "command timed out after 120s: cargo test", "command timed out after 120s: cargo test"},
		{"other check type unchanged", Check{Type: CheckFileExists, Path: "x"}, "exit 1:", "exit 1:"},
		{"no cmd unchanged", Check{Type: CheckCmdSucceeds}, "exit 1:", "exit 1:"},
		{"exit word inside text unchanged", cargo, "process exit 1", "process exit 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DescribeCheckFailure(c.check, c.in); got != c.want {
				t.Fatalf("DescribeCheckFailure(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestFailedCheck(t *testing.T) {
	one := Phase{ID: "test", Check: []Check{{Type: CheckGitClean}, {Type: CheckCmdSucceeds, Cmd: "go test ./..."}}}
	two := Phase{ID: "test", Check: []Check{{Type: CheckCmdSucceeds, Cmd: "a"}, {Type: CheckCmdSucceeds, Cmd: "b"}}}
	idx := func(i int) *int { return &i }

	if c, ok := one.FailedCheck(nil); !ok || c.Cmd != "go test ./..." {
		t.Fatalf("the only cmd check should be chosen, got %+v %v", c, ok)
	}
	if _, ok := two.FailedCheck(nil); ok {
		t.Fatal("two cmd checks and no index: ambiguous, must not guess")
	}
	if c, ok := two.FailedCheck(idx(1)); !ok || c.Cmd != "b" {
		t.Fatalf("index 1 should pick b, got %+v %v", c, ok)
	}
	if _, ok := two.FailedCheck(idx(5)); ok {
		t.Fatal("an index out of range must not pick a check")
	}
}
