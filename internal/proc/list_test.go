package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestProcessesSeesAGroupAndItsEnvironment(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "SOAK_LIST_TEST=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	find := func() (Process, bool) {
		ps, err := Processes()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ps, func(p Process) bool { return p.PID == pid })
		if i < 0 {
			return Process{}, false
		}
		return ps[i], true
	}
	p, ok := find()
	if !ok {
		t.Fatalf("pid %d not listed", pid)
	}
	if p.PGID != pid || p.PPID != os.Getpid() || p.StartTime == 0 {
		t.Fatalf("pid %d listed as %+v, want its own group, this process its parent, a start time", pid, p)
	}
	if !HasEnv(pid, "SOAK_LIST_TEST=1") || HasEnv(pid, "SOAK_LIST_TEST=2") {
		t.Fatal("HasEnv does not tell the child's environment")
	}
	h := Handle{PID: pid, PGID: pid, StartTime: p.StartTime}
	if !Alive(h) {
		t.Fatal("Alive: false for a running process")
	}
	if Alive(Handle{PID: pid, PGID: pid, StartTime: p.StartTime + 1}) {
		t.Fatal("Alive: true for another lifetime of the pid")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, ok := find(); ok {
		t.Fatalf("pid %d listed after it was killed and reaped", pid)
	}
	if Alive(h) {
		t.Fatal("Alive: true after the process was reaped")
	}
}
