package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// checkOutput is the outcome of one check.
type checkOutput struct {
	passed   bool
	detail   *string
	duration time.Duration
}

func passed(d time.Duration) checkOutput { return checkOutput{passed: true, duration: d} }

func passedNote(note string, d time.Duration) checkOutput {
	return checkOutput{passed: true, detail: &note, duration: d}
}

func failed(detail string, d time.Duration) checkOutput {
	return checkOutput{detail: &detail, duration: d}
}

// checkRun is the outcome of a phase's whole check list.
type checkRun struct {
	allPassed bool
	results   []CheckResult
	err       *ErrorInfo
}

// checkEngine runs checks in the run's working directory, as edda does
// (not in a phase's own cwd).
type checkEngine struct {
	cwd string
}

// runAll runs checks in order and stops at the first failure, marking the
// rest waiting.
func (e *checkEngine) runAll(checks []CheckSpec, phaseStartedAt string) checkRun {
	results := []CheckResult{}
	for i, spec := range checks {
		out := e.runOne(spec, phaseStartedAt)
		status := "passed"
		if !out.passed {
			status = "failed"
		}
		results = append(results, CheckResult{CheckType: spec.Type, Status: status, Detail: out.detail, DurationMS: out.duration.Milliseconds()})
		if !out.passed {
			for _, rest := range checks[i+1:] {
				results = append(results, CheckResult{CheckType: rest.Type, Status: "waiting"})
			}
			msg := "check " + spec.Type + " failed"
			if out.detail != nil {
				msg = *out.detail
			}
			idx := i
			return checkRun{results: results, err: &ErrorInfo{
				ErrorType: errCheckFailed, Message: msg, Retryable: spec.retryable(), CheckIndex: &idx, Timestamp: nowRFC3339(),
			}}
		}
	}
	return checkRun{allPassed: true, results: results}
}

func (e *checkEngine) runOne(spec CheckSpec, phaseStartedAt string) checkOutput {
	switch spec.Type {
	case "file_exists":
		return checkFileExists(e.cwd, spec.Path)
	case "file_contains":
		return checkFileContains(e.cwd, spec.Path, spec.Pattern)
	case "cmd_succeeds":
		return checkCmdSucceeds(e.cwd, spec.Cmd, spec.TimeoutSec)
	case "git_clean":
		return checkGitClean(e.cwd, spec.AllowUntracked)
	case "wait_until":
		return e.waitUntil(spec, phaseStartedAt)
	default:
		// edda_event reads edda's own ledger, which the simulator does not keep.
		return passedNote("eddasim: "+spec.Type+" is not simulated; passed without checking", 0)
	}
}

func checkFileExists(cwd, path string) checkOutput {
	if _, err := os.Stat(filepath.Join(cwd, path)); err == nil {
		return passed(0)
	}
	return failed("file not found: "+path, 0)
}

func checkFileContains(cwd, path, pattern string) checkOutput {
	data, err := os.ReadFile(filepath.Join(cwd, path))
	if err != nil {
		return failed("file not found: "+path, 0)
	}
	if strings.Contains(string(data), pattern) {
		return passed(0)
	}
	return failed(fmt.Sprintf("pattern not found in %s: %q", path, pattern), 0)
}

const stderrCapBytes = 2000

func checkCmdSucceeds(cwd, command string, timeoutSec int64) checkOutput {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutSec)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = cwd
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Own process group, so a timeout kills the command's children too
	// instead of leaving them holding the output pipes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	elapsed := time.Since(start)
	if ctx.Err() == context.DeadlineExceeded {
		return failed(fmt.Sprintf("command timed out after %ds: %s", timeoutSec, command), elapsed)
	}
	if err == nil {
		return passed(elapsed)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return failed("spawn error: "+err.Error(), elapsed)
	}
	masked := maskSecrets(stderr.String())
	if len(masked) > stderrCapBytes {
		masked = masked[:stderrCapBytes] + "..."
	}
	return failed(fmt.Sprintf("exit %d: %s", exitErr.ExitCode(), strings.TrimSpace(masked)), elapsed)
}

func checkGitClean(cwd string, allowUntracked bool) checkOutput {
	start := time.Now()
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = cwd
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		return failed("git status failed: "+strings.TrimSpace(stderr.String()), time.Since(start))
	case err != nil:
		return failed("git not available: "+err.Error(), time.Since(start))
	}
	var dirty []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(line) == "" || (allowUntracked && strings.HasPrefix(line, "??")) {
			continue
		}
		dirty = append(dirty, line)
	}
	if len(dirty) == 0 {
		return passed(time.Since(start))
	}
	preview := strings.Join(dirty[:min(5, len(dirty))], "\n")
	extra := ""
	if len(dirty) > 5 {
		extra = fmt.Sprintf("\n... and %d more", len(dirty)-5)
	}
	return failed(fmt.Sprintf("working tree not clean (%d files):\n%s%s", len(dirty), preview, extra), time.Since(start))
}

// waitUntil polls the inner check until it passes or the timeout elapses.
func (e *checkEngine) waitUntil(spec CheckSpec, phaseStartedAt string) checkOutput {
	start := time.Now()
	deadline := start.Add(time.Duration(spec.TimeoutSec) * time.Second)
	for attempt := 1; ; attempt++ {
		var out checkOutput
		if spec.Inner == nil || spec.Inner.Type == "wait_until" {
			out = failed("nested wait_until is not supported", 0)
		} else {
			out = e.runOne(*spec.Inner, phaseStartedAt)
		}
		if out.passed {
			return passedNote(fmt.Sprintf("passed after %d attempts", attempt), time.Since(start))
		}
		if !time.Now().Before(deadline) {
			last := "(no detail)"
			if out.detail != nil {
				last = *out.detail
			}
			return failed(fmt.Sprintf("timed out after %ds (%d attempts). Last: %s", spec.TimeoutSec, attempt, last), time.Since(start))
		}
		time.Sleep(min(backoff(spec.IntervalSec, attempt, spec.Backoff), time.Until(deadline)))
	}
}

func backoff(base int64, attempt int, strategy string) time.Duration {
	secs := base
	switch strategy {
	case "linear":
		secs = base * int64(attempt)
	case "exponential":
		secs = base << min(attempt-1, 20)
	}
	return time.Duration(min(secs, 300)) * time.Second
}

var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`sk-[a-zA-Z0-9]{20,}`), "[MASKED]"},
	{regexp.MustCompile(`pk-[a-zA-Z0-9]{20,}`), "[MASKED]"},
	{regexp.MustCompile(`Bearer\s+[a-zA-Z0-9._\-]+`), "Bearer [MASKED]"},
	{regexp.MustCompile(`(?i)(password|secret|token|key|api_key|apikey)=[^\s&]+`), "${1}=[MASKED]"},
}

// maskSecrets hides credentials in captured output, as edda does before
// a check detail is stored.
func maskSecrets(s string) string {
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}
