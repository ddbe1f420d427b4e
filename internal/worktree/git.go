package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The identity of the merge commits the run makes. It is passed on every
// command with -c, never written to a config file, so the user's identity
// stays the user's.
const (
	CommitterName  = "karvi-edda"
	CommitterEmail = "karvi-edda@localhost"
)

// settings go before every command. Hooks are the user's local policy for
// the user's own commits (formatters, linters that need node_modules): the
// run's checkouts and merges are mechanical, and a hook must not decide
// whether they succeed. Automatic gc and maintenance would repack the
// user's repository in the background as a side effect of a merge and
// leave a process behind.
var settings = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "user.name=" + CommitterName,
	"-c", "user.email=" + CommitterEmail,
}

// dropEnv lists variables that would point git at another repository or
// another identity than the one a command names. A worker started from a
// git hook, or a shell that exported one of them, must not redirect the
// run's commands.
var dropEnv = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_COMMON_DIR": true, "GIT_INDEX_FILE": true,
	"GIT_OBJECT_DIRECTORY": true, "GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_NAMESPACE": true,
	"GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true, "GIT_PREFIX": true,
	"GIT_IMPLICIT_WORK_TREE": true, "GIT_GRAFT_FILE": true, "GIT_REPLACE_REF_BASE": true,
	"GIT_SHALLOW_FILE": true, "GIT_CONFIG": true, "GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_AUTHOR_DATE": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_COMMITTER_DATE": true,
}

// env is the environment of every git command: the worker's, without the
// variables above, and never prompting (there is nobody to answer).
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !dropEnv[name] && !strings.HasPrefix(name, "GIT_CONFIG_KEY_") && !strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0")
}

// maxMessage bounds what an error quotes of git's output (the end, where
// git says what went wrong): errors travel into workflow histories.
const maxMessage = 2000

// gitError is a git command that did not succeed: its arguments, its exit
// code (-1 when it did not run or was killed) and what it said.
type gitError struct {
	args           []string
	code           int
	stdout, stderr string
	err            error
}

// Error says what git said: on stderr, else on stdout (where merge
// reports its failures), else how the command ended.
func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = strings.TrimSpace(e.stdout)
	}
	if msg == "" {
		msg = e.err.Error()
	}
	if len(msg) > maxMessage {
		msg = "…" + strings.ToValidUTF8(msg[len(msg)-maxMessage:], "")
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the exit code of a git command that ran and failed, else -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// git runs one git command in dir and returns its standard output. The
// context bounds it: a cancelled activity kills the command.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{"-C", dir}, settings...), args...)...)
	cmd.Env = env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.String(), &gitError{args: args, code: code, stdout: stdout.String(), stderr: stderr.String(), err: err}
	}
	return stdout.String(), nil
}

// gitLine is git for commands that print one line: the line, trimmed.
func gitLine(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := git(ctx, dir, args...)
	return strings.TrimSpace(out), err
}

// splitZ splits NUL-terminated output (the -z forms) into its fields.
func splitZ(out string) []string {
	out = strings.TrimSuffix(out, "\x00")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\x00")
}
