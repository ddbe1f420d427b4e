package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"karvi-edda-temporal/testkit/wait"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// safety is only a net against hangs; no assertion depends on timing.
const safety = 20 * time.Second

// The test binary doubles as a disposable "worker" for restart and crash
// tests: with PROC_TEST_HELPER set it runs Start from PROC_TEST_SPEC instead
// of the tests.
func TestMain(m *testing.M) {
	mode := os.Getenv("PROC_TEST_HELPER")
	if mode == "" {
		os.Exit(m.Run())
	}
	var spec Spec
	if err := json.Unmarshal([]byte(os.Getenv("PROC_TEST_SPEC")), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad spec:", err)
		os.Exit(2)
	}
	if mode == "crash-after-spawn" {
		testHookAfterSpawn = func(int) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	h, attached, err := Start(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper: start:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(struct {
		H        Handle
		Attached bool
	}{h, attached})
	time.Sleep(time.Hour) // until the test kills this "worker"
}

// testSpec builds a spec whose processes carry a marker unique to the test,
// so the test can count what really runs.
func testSpec(t *testing.T, command ...string) (Spec, string) {
	t.Helper()
	mark := fmt.Sprintf("PROC_TEST_MARK=%s-%d", t.Name(), time.Now().UnixNano())
	return Spec{
		Dir:     filepath.Join(t.TempDir(), "run"),
		Command: command,
		Env:     []string{"PATH=" + os.Getenv("PATH"), mark},
	}, mark
}

// cleanupRun makes sure nothing of the run survives the test.
func cleanupRun(t *testing.T, h Handle) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		if err := Stop(ctx, h, 0); err != nil {
			t.Errorf("cleanup stop: %v", err)
		}
		if GroupAlive(h.PGID) {
			_ = syscall.Kill(-h.PGID, syscall.SIGKILL)
			t.Errorf("group %d survived cleanup", h.PGID)
		}
	})
}

func mustStart(t *testing.T, spec Spec) Handle {
	t.Helper()
	h, attached, err := Start(spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cleanupRun(t, h)
	if attached {
		t.Fatal("fresh Start reported attached")
	}
	return h
}

// supervisors counts live session leaders carrying mark: one per spawn.
func supervisors(t *testing.T, mark string) int {
	t.Helper()
	all, err := pids()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pid := range all {
		st, err := readStat(pid)
		if err == nil && st.running() && st.session == pid && hasEnv(pid, mark) {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the safety net expires.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.EventuallyEvery(t, safety, 5*time.Millisecond, what, func() (any, bool) { ok := cond(); return ok, ok })
}

func awaitExit(t *testing.T, h Handle) Status {
	t.Helper()
	var s Status
	eventually(t, "the run to exit", func() bool {
		var err error
		if s, err = Inspect(h); err != nil {
			t.Fatal(err)
		}
		return s.Exited
	})
	return s
}

// awaitRunning waits until n members of group pgid run the program comm, so a
// test acts on the conductor itself rather than on a shell that has forked
// but not yet executed it (or on the supervisor's short-lived mv).
func awaitRunning(t *testing.T, pgid int, comm string, n int) []int {
	t.Helper()
	var found []int
	eventually(t, fmt.Sprintf("%d %q in group %d", n, comm, pgid), func() bool {
		members, err := groupMembers(pgid)
		if err != nil {
			t.Fatal(err)
		}
		found = found[:0]
		for _, pid := range members {
			if c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.TrimSpace(string(c)) == comm {
				found = append(found, pid)
			}
		}
		return len(found) >= n
	})
	return found
}

func TestStartInspectAlive(t *testing.T) {
	spec, mark := testSpec(t, "sleep", "300")
	h := mustStart(t, spec)

	if h.PID <= 1 || h.PGID != h.PID || h.StartTime == 0 || h.Token == "" {
		t.Fatalf("handle = %+v", h)
	}
	if _, err := time.Parse(time.RFC3339Nano, h.StartedAt); err != nil {
		t.Fatalf("StartedAt %q: %v", h.StartedAt, err)
	}
	st, err := readStat(h.PID)
	if err != nil {
		t.Fatal(err)
	}
	if st.session != h.PID || st.pgrp != h.PID {
		t.Fatalf("supervisor not detached: session %d pgrp %d", st.session, st.pgrp)
	}
	if own, _ := readStat(os.Getpid()); own.session == st.session {
		t.Fatal("supervisor shares the worker's session")
	}
	s, err := Inspect(h)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Alive || s.Exited || s.ExitCode != -1 {
		t.Fatalf("status = %+v", s)
	}
	rec, ok, err := readRecord(filepath.Join(filepath.Dir(h.LogPath)))
	if err != nil || !ok || rec != h {
		t.Fatalf("record on disk = %+v %v %v, want %+v", rec, ok, err, h)
	}
	if !fileExists(h.LogPath) || fileExists(h.ExitPath) {
		t.Fatal("log missing or exit file present while running")
	}
	// The conductor (sleep) runs as a child of the supervisor, in its group.
	awaitRunning(t, h.PGID, "sleep", 1)
	if n := supervisors(t, mark); n != 1 {
		t.Fatalf("%d supervisors running, want 1", n)
	}
	if !hasEnv(h.PID, TokenEnv+"="+h.Token) {
		t.Fatal("run token missing from the supervisor's environment")
	}
}

// Standard output and standard error land in files of their own: with
// --json the conductor's stdout is its event stream, and the cause of a
// crash must not drown in it.
func TestExitCodeAndLogRecorded(t *testing.T) {
	for _, tc := range []struct {
		cmd            []string
		code           int
		stdout, stderr string
	}{
		{[]string{"true"}, 0, "", ""},
		{[]string{"sh", "-c", "echo to-stdout; echo to-stderr >&2; echo more-stdout; exit 3"}, 3, "to-stdout\nmore-stdout\n", "to-stderr\n"},
		{[]string{"/nonexistent/conductor"}, 127, "", "not found"},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			spec, _ := testSpec(t, tc.cmd...)
			h := mustStart(t, spec)
			s := awaitExit(t, h)
			if s.ExitCode != tc.code || s.Alive || s.GroupAlive {
				t.Fatalf("status = %+v, want exit %d", s, tc.code)
			}
			if h.StderrPath == "" || h.StderrPath == h.LogPath {
				t.Fatalf("handle names no stderr file of its own: %+v", h)
			}
			stdout, err := os.ReadFile(h.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			stderr, err := os.ReadFile(h.StderrPath)
			if err != nil {
				t.Fatal(err)
			}
			if tc.stdout != "" && string(stdout) != tc.stdout || tc.stdout == "" && len(stdout) != 0 {
				t.Errorf("stdout %q, want %q", stdout, tc.stdout)
			}
			if !strings.Contains(string(stderr), tc.stderr) || strings.Contains(string(stderr), "stdout") {
				t.Errorf("stderr %q, want %q alone", stderr, tc.stderr)
			}
		})
	}
}

func TestConductorKilledBySignalReports128PlusN(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", `echo $$ > conductor.pid.tmp && mv conductor.pid.tmp conductor.pid && exec sleep 300`)
	h := mustStart(t, spec)
	pidFile := filepath.Join(spec.Dir, "conductor.pid")
	eventually(t, "the conductor pid", func() bool { return fileExists(pidFile) })
	data, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if s := awaitExit(t, h); s.ExitCode != 128+9 {
		t.Fatalf("status = %+v, want 137", s)
	}
}

func TestStartIsIdempotent(t *testing.T) {
	spec, mark := testSpec(t, "sleep", "300")
	h := mustStart(t, spec)

	h2, attached, err := Start(spec)
	if err != nil || !attached || h2 != h {
		t.Fatalf("second Start = %+v attached=%v err=%v, want %+v attached", h2, attached, err, h)
	}
	// Concurrent Starts, as from retried activities, all attach.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			h3, attached, err := Start(spec)
			if err != nil || !attached || h3 != h {
				t.Errorf("concurrent Start = %+v attached=%v err=%v", h3, attached, err)
			}
		})
	}
	wg.Wait()
	if n := supervisors(t, mark); n != 1 {
		t.Fatalf("%d supervisors running, want 1", n)
	}
}

func TestConcurrentFirstStartsSpawnOnce(t *testing.T) {
	spec, mark := testSpec(t, "sleep", "300")
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh int
		seen  = map[Handle]bool{}
	)
	for range 8 {
		wg.Go(func() {
			h, attached, err := Start(spec)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !attached {
				fresh++
				cleanupRun(t, h)
			}
			seen[h] = true
		})
	}
	wg.Wait()
	if fresh != 1 || len(seen) != 1 {
		t.Fatalf("%d fresh starts, %d distinct handles; want 1 and 1", fresh, len(seen))
	}
	if n := supervisors(t, mark); n != 1 {
		t.Fatalf("%d supervisors running, want 1", n)
	}
}

func TestExitedRunIsNotRestarted(t *testing.T) {
	spec, _ := testSpec(t, "sh", "-c", "echo ran >> runs")
	h := mustStart(t, spec)
	awaitExit(t, h)
	spec.Command = []string{"sh", "-c", "echo second >> runs"}
	h2, attached, err := Start(spec)
	if err != nil || !attached || h2 != h {
		t.Fatalf("Start after exit = %+v attached=%v err=%v", h2, attached, err)
	}
	if data, _ := os.ReadFile(filepath.Join(spec.Dir, "runs")); string(data) != "ran\n" {
		t.Fatalf("runs = %q, want one run", data)
	}
}

// helper starts the test binary as a throwaway worker running Start.
func helper(t *testing.T, mode string, spec Spec) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROC_TEST_HELPER="+mode, "PROC_TEST_SPEC="+string(raw))
	out := &strings.Builder{}
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

func TestWorkerKilledConductorSurvivesAndReattaches(t *testing.T) {
	spec, mark := testSpec(t, "sleep", "300")
	w, _ := helper(t, "start", spec)
	eventually(t, "the helper's record", func() bool { return fileExists(filepath.Join(spec.Dir, recordFile)) })
	if err := w.Process.Kill(); err != nil { // SIGKILL the "worker"
		t.Fatal(err)
	}
	_ = w.Wait()

	// A new worker knows only the directory.
	h, attached, err := Start(spec)
	if err != nil || !attached {
		t.Fatalf("re-attach: %+v attached=%v err=%v", h, attached, err)
	}
	cleanupRun(t, h)
	s, err := Inspect(h)
	if err != nil || !s.Alive {
		t.Fatalf("conductor did not survive its worker: %+v %v", s, err)
	}
	if n := supervisors(t, mark); n != 1 {
		t.Fatalf("%d supervisors running, want 1", n)
	}
}

func TestCrashBetweenSpawnAndRecordRecoversLiveRun(t *testing.T) {
	spec, mark := testSpec(t, "sleep", "300")
	w, _ := helper(t, "crash-after-spawn", spec)
	err := w.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not crash as arranged: %v", err)
	}
	if fileExists(filepath.Join(spec.Dir, recordFile)) {
		t.Fatal("record written although the worker crashed before it")
	}

	h, attached, err := Start(spec)
	if err != nil || !attached {
		t.Fatalf("recovery: %+v attached=%v err=%v", h, attached, err)
	}
	cleanupRun(t, h)
	if n := supervisors(t, mark); n != 1 {
		t.Fatalf("%d supervisors running, want 1 (recovery must not spawn)", n)
	}
	st, err := readStat(h.PID)
	if err != nil || st.startTime != h.StartTime || st.session != h.PID {
		t.Fatalf("recovered handle %+v does not match the supervisor: %+v %v", h, st, err)
	}
	if s, err := Inspect(h); err != nil || !s.Alive {
		t.Fatalf("recovered run not alive: %+v %v", s, err)
	}
	if h2, attached, err := Start(spec); err != nil || !attached || h2 != h {
		t.Fatalf("record not persisted by recovery: %+v %v %v", h2, attached, err)
	}
	if h.StderrPath != filepath.Join(spec.Dir, stderrFile) {
		t.Fatalf("recovered handle names stderr %q", h.StderrPath)
	}
}

func TestCrashBetweenSpawnAndRecordRecoversFinishedRun(t *testing.T) {
	spec, mark := testSpec(t, "sh", "-c", "echo ran >> runs; exit 4")
	w, _ := helper(t, "crash-after-spawn", spec)
	_ = w.Wait()
	// The orphaned supervisor finishes on its own; run.lock frees when it
	// exits.
	eventually(t, "the orphaned run to finish", func() bool {
		f, held, err := tryLock(filepath.Join(spec.Dir, runLockFile))
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			f.Close()
		}
		return !held && fileExists(filepath.Join(spec.Dir, exitFile))
	})

	h, attached, err := Start(spec)
	if err != nil || !attached {
		t.Fatalf("recovery: %+v attached=%v err=%v", h, attached, err)
	}
	cleanupRun(t, h)
	s, err := Inspect(h)
	if err != nil || s.Alive || s.ExitCode != 4 {
		t.Fatalf("status = %+v %v, want exited 4", s, err)
	}
	if data, _ := os.ReadFile(filepath.Join(spec.Dir, "runs")); string(data) != "ran\n" {
		t.Fatalf("runs = %q, want exactly one run", data)
	}
	if n := supervisors(t, mark); n != 0 {
		t.Fatalf("%d supervisors running, want 0", n)
	}
}

func TestFailedStartLeavesDirectoryStartable(t *testing.T) {
	spec, _ := testSpec(t, "no-such-conductor-binary")
	if _, _, err := Start(spec); err == nil || !strings.Contains(err.Error(), "no-such-conductor-binary") {
		t.Fatalf("missing program: err = %v", err)
	}
	spec.Command = []string{"true"}
	h := mustStart(t, spec)
	if s := awaitExit(t, h); s.ExitCode != 0 {
		t.Fatalf("status = %+v", s)
	}
	if _, _, err := Start(Spec{Dir: spec.Dir}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, _, err := Start(Spec{Command: []string{"true"}}); err == nil {
		t.Fatal("empty run directory accepted")
	}
}

func TestHandleJSONRoundTrip(t *testing.T) {
	h := Handle{PID: 4194303, PGID: 4194303, StartTime: 1 << 50, StartedAt: "2026-01-01T00:00:00Z",
		LogPath: "/r/conductor.log", StderrPath: "/r/conductor.stderr.log", ExitPath: "/r/exit", Token: "ab"}
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Handle
	if err := json.Unmarshal(raw, &back); err != nil || back != h {
		t.Fatalf("round trip %s -> %+v %v", raw, back, err)
	}
	// A record written before stderr had its own file still reads, and one
	// without it writes no empty key.
	old := `{"pid":7,"pgid":7,"startTime":1,"startedAt":"x","logPath":"/r/conductor.log","exitPath":"/r/exit","token":"ab"}`
	var prev Handle
	if err := json.Unmarshal([]byte(old), &prev); err != nil || prev.StderrPath != "" || prev.LogPath != "/r/conductor.log" {
		t.Fatalf("old record -> %+v %v", prev, err)
	}
	if again, _ := json.Marshal(prev); string(again) != old {
		t.Fatalf("old record re-encoded as %s", again)
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (we) ird (name)) S 1 777 777 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10 18446744073709551615\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.state != 'S' || st.pgrp != 777 || st.session != 777 || st.startTime != 98765 {
		t.Fatalf("parsed %+v", st)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 a 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestEnvironmentIsExactlyTheSpecsPlusToken(t *testing.T) {
	// No PATH at all: the program and the supervisor's mv are resolved by
	// Start, so the bookkeeping still works.
	spec, mark := testSpec(t, "sh", "-c", `env > env.out; exit 5`)
	spec.Env = []string{mark, TokenEnv + "=forged"}
	h := mustStart(t, spec)
	if s := awaitExit(t, h); s.ExitCode != 5 {
		t.Fatalf("status = %+v, want exit 5", s)
	}
	data, err := os.ReadFile(filepath.Join(spec.Dir, "env.out"))
	if err != nil {
		t.Fatal(err)
	}
	env := string(data)
	if !strings.Contains(env, mark+"\n") || !strings.Contains(env, TokenEnv+"="+h.Token+"\n") || strings.Contains(env, "forged") {
		t.Fatalf("environment:\n%s", env)
	}
	if strings.Contains(env, "\nHOME=") || strings.HasPrefix(env, "HOME=") {
		t.Fatalf("worker environment leaked:\n%s", env)
	}
}
