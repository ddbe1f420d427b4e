package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"karvi-edda-temporal/testkit/wait"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// simBin is the simulator binary built once for all tests.
var simBin string

// safetyNet bounds every wait; it never decides a test's outcome on its own.
const safetyNet = 60 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "eddasim-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	simBin = filepath.Join(dir, "eddasim")
	if out, err := exec.Command("go", "build", "-o", simBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building eddasim: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type simResult struct {
	stdout, stderr string
	code           int
}

// simEnv is the test process env without a stray EDDASIM_SCENARIO, plus extra.
func simEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, scenarioEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runSim runs the simulator to completion in dir.
func runSim(t *testing.T, dir string, env []string, args ...string) simResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	cmd := exec.CommandContext(ctx, simBin, args...)
	cmd.Dir = dir
	cmd.Env = simEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := simResult{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.code = exitErr.ExitCode()
	default:
		t.Fatalf("running eddasim %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("eddasim %v still running after %v\nstdout:\n%s\nstderr:\n%s", args, safetyNet, res.stdout, res.stderr)
	}
	return res
}

// startSim starts the simulator as a process-group leader and stops the
// group at test end if the test did not.
func startSim(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(simBin, args...)
	cmd.Dir = dir
	cmd.Env = simEnv(env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting eddasim: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd, &out
}

// waitExit waits for a started simulator and returns its exit code (-1 if
// killed by a signal).
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatalf("waiting for eddasim: %v", err)
		}
		return cmd.ProcessState.ExitCode()
	case <-time.After(safetyNet):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("eddasim did not exit within %v", safetyNet)
		return 0
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newPlan writes plan.yaml into a fresh directory and returns the directory.
func newPlan(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "plan.yaml"), yaml)
	return dir
}

type event map[string]any

func (e event) str(k string) string {
	s, _ := e[k].(string)
	return s
}

func (e event) num(k string) float64 {
	f, _ := e[k].(float64)
	return f
}

func readEvents(t *testing.T, cwd, plan string) []event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir(cwd, plan), "events.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("events.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// typesOf lists event types, with the phase id where there is one.
func typesOf(events []event) []string {
	var out []string
	for _, e := range events {
		s := e.str("type")
		if id := e.str("phase_id"); id != "" && s != "agent_progress" {
			s += ":" + id
		}
		out = append(out, s)
	}
	return out
}

func readPlanState(t *testing.T, cwd, plan string) *PlanState {
	t.Helper()
	st, err := loadState(cwd, plan)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		t.Fatalf("no state.json for plan %q in %s", plan, cwd)
	}
	return st
}

func mustPhase(t *testing.T, st *PlanState, id string) *PhaseState {
	t.Helper()
	ps := st.phase(id)
	if ps == nil {
		t.Fatalf("state has no phase %q", id)
	}
	return ps
}

// waitForEvent polls events.jsonl until pred holds for some event.
func waitForEvent(t *testing.T, cwd, plan string, pred func(event) bool) event {
	t.Helper()
	var found event
	wait.EventuallyEvery(t, safetyNet, 10*time.Millisecond, "a matching event in "+cwd, func() (any, bool) {
		events := readEvents(t, cwd, plan)
		for _, e := range events {
			if pred(e) {
				found = e
				return nil, true
			}
		}
		return fmt.Sprintf("events %v", typesOf(events)), false
	})
	return found
}

func isType(typ, phase string) func(event) bool {
	return func(e event) bool { return e.str("type") == typ && (phase == "" || e.str("phase_id") == phase) }
}

func assertTypes(t *testing.T, events []event, want ...string) {
	t.Helper()
	got := typesOf(events)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("event types:\n got %v\nwant %v", got, want)
	}
}

func assertSeqFromZero(t *testing.T, events []event) {
	t.Helper()
	for i, e := range events {
		if int(e.num("seq")) != i {
			t.Fatalf("event %d has seq %v, want %d", i, e["seq"], i)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.str("ts")); err != nil {
			t.Fatalf("event %d ts %q: %v", i, e.str("ts"), err)
		}
	}
}

func assertExit(t *testing.T, res simResult, want int) {
	t.Helper()
	if res.code != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, want, res.stdout, res.stderr)
	}
}

// processGone reports whether pid has exited. A zombie counts as gone: an
// orphan is reaped by whatever init the machine runs, which may be slow or
// never in a bare container.
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state field follows the parenthesised command name.
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] == 'Z'
	}
	return false
}
