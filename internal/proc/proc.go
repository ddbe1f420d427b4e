package proc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TokenEnv is set, with a random value unique to the run, in the environment
// of the supervisor and everything it starts. It proves a process belongs to
// the run when the group leader is gone and its pid may have been recycled.
const TokenEnv = "KARVI_EDDA_RUN_TOKEN"

// Files in the run directory.
const (
	recordFile     = "handle.json"          // the Handle, written atomically by Start
	supervisorFile = "supervisor"           // "<pid> <token>", written by the supervisor before it runs the command
	exitFile       = "exit"                 // the command's exit status, written by the supervisor
	logFile        = "conductor.log"        // the command's standard output
	stderrFile     = "conductor.stderr.log" // its standard error
	startLockFile  = "start.lock"           // serialises Start calls
	runLockFile    = "run.lock"             // held by the supervisor for its whole life
)

// supervisorScript runs the command and records its exit status, which a
// restarted worker (no longer the parent) could not otherwise learn.
//
// It records its own pid and the run token before running the command, so a
// Start that crashed between spawning and writing handle.json can be
// recovered. File descriptor 3 is run.lock, locked by Start; the shell keeps
// it open for its whole life so the lock is held exactly while the supervisor
// lives, and closes it for everything it runs so no stray descendant can keep
// the lock (and the "a run is live" verdict) alive. A shell was chosen over
// re-executing the worker binary because it needs no hook in the worker's or
// the tests' main, and dash/bash report a signalled child as 128+signal.
//
// $1 is the run directory, $2 the mv program (resolved by Start, so a Spec.Env
// without PATH cannot break the bookkeeping), the rest the command.
const supervisorScript = `d=$1; mv=$2; shift 2
printf '%s %s\n' "$$" "$` + TokenEnv + `" > "$d/` + supervisorFile + `.tmp" 3>&- &&
  "$mv" -f "$d/` + supervisorFile + `.tmp" "$d/` + supervisorFile + `" 3>&- || exit 125
"$@" 3>&-
rc=$?
echo "$rc" > "$d/` + exitFile + `.tmp" 3>&- && "$mv" -f "$d/` + exitFile + `.tmp" "$d/` + exitFile + `" 3>&-
`

// How long Start waits for another Start of the same directory, and for the
// supervisor of a crashed Start to record itself. Both normally take
// milliseconds; the bounds only turn a wedged state into an error.
const (
	startLockWait  = 30 * time.Second
	supervisorWait = 10 * time.Second
	lockPoll       = 5 * time.Millisecond
)

// testHookAfterSpawn, if set, runs after the process is spawned and before
// handle.json is written: tests crash the worker there.
var testHookAfterSpawn func(pid int)

// Spec describes one conductor run.
type Spec struct {
	// Dir is the run directory holding the record, log, exit file and
	// locks. One Dir is one attempt: Start never runs a second process in
	// it, so a new attempt needs a new Dir. Created if missing.
	Dir string
	// Cwd is the process's working directory; empty means Dir.
	Cwd string
	// Command is the program and its arguments. A bare program name is
	// resolved on the worker's PATH.
	Command []string
	// Env is the complete environment, as in os/exec; nil inherits the
	// worker's environment (including its secrets: pass an explicit list
	// to avoid that). TokenEnv is added either way.
	Env []string
}

// Handle identifies a started run. It is plain data, safe to keep in workflow
// history.
type Handle struct {
	PID  int `json:"pid"`  // the supervisor, leader of its own session and group
	PGID int `json:"pgid"` // equals PID
	// StartTime is field 22 of /proc/<pid>/stat: with PID it names one
	// process lifetime, defeating pid reuse. 0 when the supervisor was
	// already gone when the run was recovered (it then never reads as alive).
	StartTime uint64 `json:"startTime"`
	StartedAt string `json:"startedAt"` // RFC 3339, UTC
	// LogPath holds the command's standard output. With --json the
	// conductor copies its events there, so what it says about itself is
	// kept apart in StderrPath (empty for runs recorded before stderr had
	// a file of its own: their LogPath holds both).
	LogPath    string `json:"logPath"`
	StderrPath string `json:"stderrPath,omitempty"`
	ExitPath   string `json:"exitPath"`
	Token      string `json:"token"` // value of TokenEnv in the run's processes
}

// Start starts the run described by spec, or returns the run already started
// in spec.Dir (attached = true) whether or not it is still alive. It never
// starts a second process for the same Dir.
//
// Crash safety: Start holds an flock on Dir/start.lock while it decides, so
// concurrent Starts in any process are serialised, and the kernel releases it
// if the worker dies. Before spawning it takes an flock on Dir/run.lock and
// hands that descriptor to the supervisor, which keeps it for its lifetime;
// the supervisor writes Dir/supervisor (its pid) before it runs the command.
// So when handle.json is missing (the worker died between spawn and record):
//   - run.lock held by someone else: the supervisor lives; wait for its pid
//     file and record it (its start time is read while the lock, and hence
//     the process, is verifiably still there);
//   - run.lock free and Dir/supervisor present: the run happened and its
//     supervisor is gone; record that (not alive, exit status from the file);
//   - run.lock free and no Dir/supervisor: the command never ran, because the
//     supervisor records itself first; it is safe to spawn.
func Start(spec Spec) (Handle, bool, error) {
	if spec.Dir == "" {
		return Handle{}, false, errors.New("proc: start: empty run directory")
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return Handle{}, false, errors.New("proc: start: empty command")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return Handle{}, false, fmt.Errorf("proc: start: resolve run directory %s: %w", spec.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Handle{}, false, fmt.Errorf("proc: start: create run directory: %w", err)
	}

	startLock, err := acquire(filepath.Join(dir, startLockFile), startLockWait)
	if err != nil {
		return Handle{}, false, fmt.Errorf("proc: start in %s: %w", dir, err)
	}
	defer startLock.Close() // releases the flock

	for range 3 {
		if h, ok, err := readRecord(dir); err != nil || ok {
			return h, ok, err
		}
		runLock, held, err := tryLock(filepath.Join(dir, runLockFile))
		if err != nil {
			return Handle{}, false, fmt.Errorf("proc: start in %s: %w", dir, err)
		}
		if held {
			h, ok, err := adoptLive(dir)
			if err != nil || ok {
				return h, ok, err
			}
			continue // the supervisor exited meanwhile: decide again
		}
		// run.lock is ours: no supervisor of this directory is alive.
		if sup, ok, err := readSupervisor(dir); err != nil || ok {
			runLock.Close()
			if err != nil {
				return Handle{}, false, err
			}
			h := sup.handle(dir, 0)
			if err := writeRecord(dir, h); err != nil {
				return Handle{}, false, err
			}
			return h, true, nil
		}
		h, err := spawn(dir, spec, runLock)
		runLock.Close() // the supervisor keeps the lock through its own descriptor
		return h, false, err
	}
	return Handle{}, false, fmt.Errorf("proc: start in %s: run state kept changing; retry", dir)
}

// adoptLive records the run whose supervisor holds run.lock but whose Start
// died before writing handle.json. ok=false means the supervisor exited while
// being inspected.
func adoptLive(dir string) (Handle, bool, error) {
	deadline := time.Now().Add(supervisorWait)
	for {
		sup, found, err := readSupervisor(dir)
		if err != nil {
			return Handle{}, false, err
		}
		if found {
			st, err := readStat(sup.pid)
			if err != nil && !errors.Is(err, errGone) {
				return Handle{}, false, fmt.Errorf("proc: inspect supervisor %d in %s: %w", sup.pid, dir, err)
			}
			// The start time only counts if the lock was still held after
			// reading it: then the supervisor lived throughout and the pid
			// cannot have been recycled.
			f, held, lerr := tryLock(filepath.Join(dir, runLockFile))
			if lerr != nil {
				return Handle{}, false, fmt.Errorf("proc: start in %s: %w", dir, lerr)
			}
			if !held {
				f.Close()
				return Handle{}, false, nil
			}
			if err != nil || st.pgrp != sup.pid || st.session != sup.pid {
				return Handle{}, false, fmt.Errorf("proc: start in %s: supervisor pid %d holds no session of its own; refusing to adopt it", dir, sup.pid)
			}
			h := sup.handle(dir, st.startTime)
			if err := writeRecord(dir, h); err != nil {
				return Handle{}, false, err
			}
			return h, true, nil
		}
		if time.Now().After(deadline) {
			return Handle{}, false, fmt.Errorf("proc: start in %s: a supervisor holds %s but has not recorded its pid within %s", dir, runLockFile, supervisorWait)
		}
		time.Sleep(lockPoll)
	}
}

func spawn(dir string, spec Spec, runLock *os.File) (Handle, error) {
	token, err := newToken()
	if err != nil {
		return Handle{}, err
	}
	prog := spec.Command[0]
	if !strings.Contains(prog, "/") {
		if prog, err = exec.LookPath(prog); err != nil {
			return Handle{}, fmt.Errorf("proc: start: conductor program: %w", err)
		}
	}
	mv, err := exec.LookPath("mv")
	if err != nil {
		return Handle{}, fmt.Errorf("proc: start: the supervisor needs mv: %w", err)
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = dir
	}
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, TokenEnv+"=") })
	env = append(env, TokenEnv+"="+token)

	logPath, stderrPath := filepath.Join(dir, logFile), filepath.Join(dir, stderrFile)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Handle{}, fmt.Errorf("proc: start: open log: %w", err)
	}
	defer logf.Close()
	errf, err := os.OpenFile(stderrPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Handle{}, fmt.Errorf("proc: start: open stderr log: %w", err)
	}
	defer errf.Close()

	args := append([]string{"-c", supervisorScript, "karvi-edda-supervisor", dir, mv, prog}, spec.Command[1:]...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = errf
	cmd.ExtraFiles = []*os.File{runLock} // fd 3
	// Own session: no controlling terminal, no signals aimed at the
	// worker's group, and a group of its own to stop as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Handle{}, fmt.Errorf("proc: start %q in %s: %w", spec.Command, cwd, err)
	}
	pid := cmd.Process.Pid
	started := time.Now().UTC()
	// Read before reaping: an unreaped child (even a zombie) keeps its pid
	// and /proc entry, so this start time is certainly its own.
	st, err := readStat(pid)
	// Reap it while this worker lives so it never lingers as a zombie; a
	// later worker learns its status from the exit file instead.
	go func() { _ = cmd.Wait() }()
	if err != nil {
		return Handle{}, fmt.Errorf("proc: read start time of supervisor %d: %w", pid, err)
	}
	if testHookAfterSpawn != nil {
		testHookAfterSpawn(pid)
	}
	h := Handle{
		PID: pid, PGID: pid, StartTime: st.startTime,
		StartedAt: started.Format(time.RFC3339Nano),
		LogPath:   logPath, StderrPath: stderrPath, ExitPath: filepath.Join(dir, exitFile), Token: token,
	}
	if err := writeRecord(dir, h); err != nil {
		// The process runs; the next Start recovers it from run.lock and
		// the supervisor file.
		return h, err
	}
	return h, nil
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("proc: generate run token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

type supervisor struct {
	pid     int
	token   string
	written time.Time
}

func (s supervisor) handle(dir string, startTime uint64) Handle {
	h := Handle{
		PID: s.pid, PGID: s.pid, StartTime: startTime,
		StartedAt: s.written.UTC().Format(time.RFC3339Nano),
		LogPath:   filepath.Join(dir, logFile), ExitPath: filepath.Join(dir, exitFile), Token: s.token,
	}
	// A run spawned before stderr had a file of its own wrote both to
	// LogPath; name the file only when the run has one.
	if p := filepath.Join(dir, stderrFile); fileExists(p) {
		h.StderrPath = p
	}
	return h
}

func readSupervisor(dir string) (supervisor, bool, error) {
	p := filepath.Join(dir, supervisorFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return supervisor{}, false, nil
	}
	if err != nil {
		return supervisor{}, false, fmt.Errorf("proc: read %s: %w", p, err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return supervisor{}, false, fmt.Errorf("proc: malformed %s: %q", p, data)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return supervisor{}, false, fmt.Errorf("proc: malformed pid in %s: %q", p, data)
	}
	s := supervisor{pid: pid, token: f[1]}
	if fi, err := os.Stat(p); err == nil {
		s.written = fi.ModTime()
	}
	return s, true, nil
}

// Recorded is the run recorded in dir (false when there is none): what a
// worker that did not start the run needs to inspect or stop it.
func Recorded(dir string) (Handle, bool, error) { return readRecord(dir) }

func readRecord(dir string) (Handle, bool, error) {
	p := filepath.Join(dir, recordFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Handle{}, false, nil
	}
	if err != nil {
		return Handle{}, false, fmt.Errorf("proc: read %s: %w", p, err)
	}
	var h Handle
	if err := json.Unmarshal(data, &h); err != nil {
		return Handle{}, false, fmt.Errorf("proc: parse %s: %w", p, err)
	}
	if err := h.validate(); err != nil {
		return Handle{}, false, fmt.Errorf("proc: %s: %w", p, err)
	}
	return h, true, nil
}

// writeRecord replaces handle.json atomically and durably.
func writeRecord(dir string, h Handle) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return fmt.Errorf("proc: encode handle: %w", err)
	}
	p := filepath.Join(dir, recordFile)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("proc: write %s: %w", tmp, err)
	}
	_, werr := f.Write(append(data, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("proc: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("proc: install %s: %w", p, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: makes the rename survive a power loss
		d.Close()
	}
	return nil
}

// tryLock opens path and tries an exclusive flock without blocking. held
// reports that someone else holds it; on success the caller owns the
// returned file and the lock until it closes it.
func tryLock(path string) (f *os.File, held bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, true, nil
	default:
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
}

// acquire waits (bounded) for an exclusive flock on path. Polling instead of
// a blocking flock keeps the wait bounded; holders keep it for milliseconds.
func acquire(path string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, held, err := tryLock(path)
		if err != nil || !held {
			return f, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s still held after %s", path, wait)
		}
		time.Sleep(lockPoll)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
