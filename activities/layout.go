package activities

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"karvi-edda-temporal/mapping"
)

// Layout maps tasks and plans to directories under the work root:
//
//	<root>/tasks/<taskId>/                 the conductor's cwd (the agent's workspace)
//	<root>/runs/<taskId>/<planName>/       plan.yaml, the run record, the conductor's output
//
// Run records live outside the workspace so they never make a git_clean
// check fail.
type Layout struct {
	root string
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SafeName reports whether a task id can name a directory under the work
// root as it is.
func SafeName(id string) bool { return safeName.MatchString(id) }

var planNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,127}$`)

// NewLayout resolves the work root to an absolute path without symlinks, so
// that containment checks compare real paths.
func NewLayout(root string) (Layout, error) {
	if root == "" {
		return Layout{}, fmt.Errorf("work root is not configured")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Layout{}, fmt.Errorf("work root %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return Layout{}, fmt.Errorf("create work root %s: %w", abs, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Layout{}, fmt.Errorf("work root %s: %w", abs, err)
	}
	return Layout{root: real}, nil
}

// Root is the resolved work root.
func (l Layout) Root() string { return l.root }

// TaskCwd is the task's working directory: dispatch.workingDir when it lies
// inside the work root, else <root>/tasks/<taskId>.
func (l Layout) TaskCwd(d mapping.DispatchPlan) (string, error) {
	if !safeName.MatchString(d.TaskID) {
		return "", fmt.Errorf("taskId %q is not a safe directory name", d.TaskID)
	}
	if d.WorkingDir == "" {
		return filepath.Join(l.root, "tasks", d.TaskID), nil
	}
	dir := d.WorkingDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(l.root, dir)
	}
	// Resolve what exists of the path, so a symlink inside the root cannot
	// point the conductor (or the MkdirAll that creates its directory)
	// outside it.
	dir = ResolveExisting(filepath.Clean(dir))
	if !l.Contains(dir) {
		return "", fmt.Errorf("workingDir %q is outside the work root %s", d.WorkingDir, l.root)
	}
	return dir, nil
}

// ResolveExisting resolves symlinks in the longest existing prefix of path
// and appends the components that do not exist yet.
func ResolveExisting(path string) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(p) == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// RunDir is where one plan's record lives.
func (l Layout) RunDir(taskID, planName string) (string, error) {
	if !safeName.MatchString(taskID) {
		return "", fmt.Errorf("taskId %q is not a safe directory name", taskID)
	}
	if !planNameRE.MatchString(planName) {
		return "", fmt.Errorf("plan name %q is not kebab-case", planName)
	}
	dir := filepath.Join(l.root, "runs", taskID, planName)
	if !l.Contains(dir) {
		return "", fmt.Errorf("run directory %s escapes the work root", dir)
	}
	return dir, nil
}

func (l Layout) Contains(path string) bool {
	rel, err := filepath.Rel(l.root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
