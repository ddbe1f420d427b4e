package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// agentEdit is the work an agent leaves behind: a line appended to the
// file the edit directive names and, in a git work tree, a commit of it,
// as an agent asked to commit its work would. Two plans editing one file
// from the same base conflict when their branches merge.
func (r *runner) agentEdit(phaseID string, spec simSpec, attempt int) error {
	if spec.Edit == "" {
		return nil
	}
	path := filepath.Join(r.cwd, spec.Edit)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("edit %s: %w", spec.Edit, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("edit %s: %w", spec.Edit, err)
	}
	_, err = fmt.Fprintf(f, "%s: phase %s, attempt %d\n", r.plan.Name, phaseID, attempt)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("edit %s: %w", spec.Edit, err)
	}
	if out, err := r.git("rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(out) != "true" {
		return nil // not a repository: the edit stays a plain file change
	}
	if out, err := r.git("add", "--", spec.Edit); err != nil {
		return fmt.Errorf("git add %s: %v: %s", spec.Edit, err, out)
	}
	msg := fmt.Sprintf("%s: %s (attempt %d)", r.plan.Name, phaseID, attempt)
	if out, err := r.git("-c", "user.name=eddasim", "-c", "user.email=eddasim@localhost", "commit", "-q", "-m", msg); err != nil {
		return fmt.Errorf("git commit: %v: %s", err, out)
	}
	return nil
}

func (r *runner) git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", r.cwd}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
