package worktree

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Errors that no retry can mend: a person has to change the repository or
// the request. Match them with errors.Is.
var (
	// ErrNotRepository: the path is not the top of a git working tree (no
	// such directory, not a repository, a bare one, or a subdirectory).
	ErrNotRepository = errors.New("not the top of a git working tree")
	// ErrUnknownRevision: the base, the feature branch or the task branch
	// does not exist.
	ErrUnknownRevision = errors.New("unknown revision")
	// ErrInvalidName: a slug, task id or branch name that cannot be used.
	ErrInvalidName = errors.New("invalid name")
	// ErrInUse: a branch is checked out where the run cannot use it (the
	// feature branch in the user's checkout, say), or a worktree's place
	// is taken by another branch.
	ErrInUse = errors.New("in use")
)

// Dir is the folder, at the top of the repository, that holds every
// worktree of every run.
const Dir = ".worktrees"

// integration names the worktree in which a run merges its tasks. Task ids
// cannot start with a dot, so it never meets a task's worktree.
const integration = ".integration"

var componentRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Prepared is the feature branch a run merges into.
type Prepared struct {
	// Repo is the repository's top directory, absolute, symlinks resolved.
	Repo string
	// Commit is the feature branch's tip.
	Commit string
	// Created: the branch did not exist and was made from the base.
	Created bool
}

// Worktree is a task's worktree.
type Worktree struct {
	// Path is absolute: the task's working directory.
	Path string
	// Branch is the task's branch (BranchName).
	Branch string
}

// BranchName is the branch of a task's worktree: the feature branch's
// name, a hyphen and the task id. The name a reader would expect,
// <feature>/<task>, cannot exist next to the feature branch: git keeps a
// branch a/b as a file refs/heads/a/b, so it cannot also be a directory
// holding a/b/c. With a hyphen the task branches sort right after their
// feature branch in `git branch`, and task ids are unique in a run, so
// two tasks never share a branch.
func BranchName(featureBranch, task string) string { return featureBranch + "-" + task }

// TaskPath is where a task's worktree lives: <repo>/.worktrees/<slug>/<task>.
func TaskPath(repo, slug, task string) string { return filepath.Join(repo, Dir, slug, task) }

// IntegrationPath is where a run merges: <repo>/.worktrees/<slug>/.integration,
// checked out on the feature branch. Remove it when the run is over.
func IntegrationPath(repo, slug string) string { return filepath.Join(repo, Dir, slug, integration) }

// Prepare makes repo ready for a run that merges into featureBranch: the
// branch exists (made from base, HEAD when base is empty, when it does
// not) and no checkout of the user's holds it, and .worktrees/ is listed
// in .git/info/exclude so the user's `git status` never shows the run's
// worktrees. Nothing in the user's checkout changes: not its branch, not
// its index, not its files. Calling it again changes nothing.
func Prepare(ctx context.Context, repo, featureBranch, base string) (Prepared, error) {
	root, err := topLevel(ctx, repo)
	if err != nil {
		return Prepared{}, err
	}
	if err := checkBranchName(ctx, root, featureBranch); err != nil {
		return Prepared{}, err
	}
	p := Prepared{Repo: root}
	p.Commit, err = branchTip(ctx, root, featureBranch)
	if err != nil {
		return Prepared{}, err
	}
	if p.Commit == "" {
		if base == "" {
			base = "HEAD"
		}
		commit, err := resolveCommit(ctx, root, base)
		if err != nil {
			return Prepared{}, fmt.Errorf("prepare %s: base: %w", root, err)
		}
		if err := checkNoClash(ctx, root, featureBranch); err != nil {
			return Prepared{}, fmt.Errorf("prepare %s: %w", root, err)
		}
		// The empty old value makes the update fail if the branch appeared
		// meanwhile, instead of moving it.
		if _, err := git(ctx, root, "update-ref", "-m", "karvi-edda: feature branch from "+base,
			"refs/heads/"+featureBranch, commit, ""); err != nil {
			if tip, _ := branchTip(ctx, root, featureBranch); tip == "" {
				return Prepared{}, fmt.Errorf("prepare %s: create branch %s: %w", root, featureBranch, err)
			}
		} else {
			p.Created = true
		}
		if p.Commit, err = branchTip(ctx, root, featureBranch); err != nil {
			return Prepared{}, err
		}
	}
	wts, err := list(ctx, root)
	if err != nil {
		return Prepared{}, err
	}
	for _, w := range wts {
		if w.branch == featureBranch && !isIntegration(root, w.path) {
			return Prepared{}, fmt.Errorf("prepare %s: feature branch %s is checked out in %s: switch that checkout to another branch, the run merges into %s from a worktree of its own: %w",
				root, featureBranch, w.path, featureBranch, ErrInUse)
		}
	}
	if err := exclude(ctx, root, "/"+Dir+"/"); err != nil {
		return Prepared{}, fmt.Errorf("prepare %s: %w", root, err)
	}
	return p, nil
}

// Exclude adds patterns to the repository's info/exclude, each unless a
// line already says the same (with or without its leading and trailing
// slash). That file is the repository's own ignore list, shared by all
// its worktrees and never committed; the user's .gitignore stays as it
// is.
func Exclude(ctx context.Context, repo string, patterns ...string) error {
	root, err := topLevel(ctx, repo)
	if err != nil {
		return err
	}
	if err := exclude(ctx, root, patterns...); err != nil {
		return fmt.Errorf("exclude in %s: %w", root, err)
	}
	return nil
}

// isIntegration reports whether path is the integration worktree of some
// run of the repository at root.
func isIntegration(root, path string) bool {
	return filepath.Base(path) == integration && filepath.Dir(filepath.Dir(path)) == filepath.Join(root, Dir)
}

func exclude(ctx context.Context, root string, patterns ...string) error {
	path, err := gitLine(ctx, root, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	have := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		have[strings.Trim(strings.TrimSpace(sc.Text()), "/")] = true
	}
	var add strings.Builder
	if len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
		add.WriteString("\n")
	}
	n := add.Len()
	for _, p := range patterns {
		if key := strings.Trim(p, "/"); !have[key] {
			have[key] = true
			add.WriteString(p + "\n")
		}
	}
	if add.Len() == n {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(add.String()); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Create gives a task its worktree at <repo>/.worktrees/<slug>/<task>, on
// a new branch (BranchName) made from the feature branch's current tip.
// It is idempotent: a worktree already there on that branch is returned
// as it is, with whatever the task did in it; one left half made by a
// killed attempt is removed and made again; a branch that exists without
// its worktree (the worktree was removed, or the attempt died between the
// two steps) gets its worktree back and keeps its commits.
func Create(ctx context.Context, repo, slug, task, featureBranch string) (Worktree, error) {
	root, err := topLevel(ctx, repo)
	if err != nil {
		return Worktree{}, err
	}
	if err := errors.Join(checkComponent("slug", slug), checkComponent("task", task)); err != nil {
		return Worktree{}, err
	}
	feature, err := featureTip(ctx, root, featureBranch)
	if err != nil {
		return Worktree{}, err
	}
	wt := Worktree{Path: TaskPath(root, slug, task), Branch: BranchName(featureBranch, task)}
	if err := checkBranchName(ctx, root, wt.Branch); err != nil {
		return Worktree{}, err
	}
	ok, err := ensure(ctx, root, wt.Path, wt.Branch)
	if err != nil || ok {
		return wt, err
	}
	tip, err := branchTip(ctx, root, wt.Branch)
	if err != nil {
		return Worktree{}, err
	}
	args := []string{"worktree", "add", "--quiet", wt.Path, wt.Branch}
	if tip == "" {
		if err := checkNoClash(ctx, root, wt.Branch); err != nil {
			return Worktree{}, fmt.Errorf("create worktree for task %s: %w", task, err)
		}
		args = []string{"worktree", "add", "--quiet", "--no-track", "-b", wt.Branch, wt.Path, feature}
	}
	if _, err := git(ctx, root, args...); err != nil {
		return Worktree{}, fmt.Errorf("create worktree for task %s: %w", task, err)
	}
	return wt, nil
}

// ensure finds the worktree at path checked out on branch. It reports
// true when it is there and usable. Otherwise it clears the place (a half
// made or vanished worktree, a directory left without one) so that
// `git worktree add` can make it, and reports false. A worktree there on
// another branch, or branch checked out elsewhere, is an error: a person
// put it there.
func ensure(ctx context.Context, root, path, branch string) (bool, error) {
	wts, err := list(ctx, root)
	if err != nil {
		return false, err
	}
	for _, w := range wts {
		switch {
		case w.path != path && w.branch == branch:
			return false, fmt.Errorf("branch %s is checked out in %s, not in %s: %w", branch, w.path, path, ErrInUse)
		case w.path != path:
		case w.locked == "initializing" || w.prunable:
			// `git worktree add` locks a worktree with this reason while it
			// checks it out and unlocks it when done: the lock survived a
			// killed command, and the checkout is incomplete.
			if _, err := git(ctx, root, "worktree", "remove", "--force", "--force", path); err != nil {
				return false, fmt.Errorf("repair worktree %s: %w", path, err)
			}
		case w.branch == branch:
			return true, nil
		default:
			on := "a detached HEAD"
			if w.branch != "" {
				on = "branch " + w.branch
			}
			return false, fmt.Errorf("worktree %s is on %s, not %s: %w", path, on, branch, ErrInUse)
		}
	}
	// Not a worktree (any more): what is left there is the debris of one.
	if err := os.RemoveAll(path); err != nil {
		return false, fmt.Errorf("clear %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	return false, nil
}

// Remove deletes the worktree at path, whatever it holds (the run's
// worktrees are the run's), and git's record of it. Its branch stays: a
// merged branch is history, an unmerged one is work. A relative path is
// taken from the repository's top. Only a path under <repo>/.worktrees/
// is removed; removing one that is gone already succeeds.
func Remove(ctx context.Context, repo, path string) error {
	root, err := topLevel(ctx, repo)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	path = filepath.Clean(path)
	dir := filepath.Join(root, Dir)
	// A symlink on the way could lead the removal out of .worktrees.
	if rel, err := filepath.Rel(dir, path); err != nil || !filepath.IsLocal(rel) || !strings.Contains(rel, string(filepath.Separator)) || canonical(path) != path {
		return fmt.Errorf("remove %s: not a worktree of a run (those are in %s/<slug>/): %w", path, dir, ErrInvalidName)
	}
	wts, err := list(ctx, root)
	if err != nil {
		return err
	}
	for _, w := range wts {
		if w.path == path {
			// Twice forced: also when the worktree is locked (a killed
			// `git worktree add` leaves it so), or gone from the disk.
			if _, err := git(ctx, root, "worktree", "remove", "--force", "--force", path); err != nil {
				return fmt.Errorf("remove worktree %s: %w", path, err)
			}
		}
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if isIntegration(root, path) {
		// Merge's lock: the run is over once its integration worktree goes.
		if err := os.Remove(path + ".lock"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path+".lock", err)
		}
	}
	// Drop the run's folder and .worktrees itself once empty; a folder
	// that still holds something stays (os.Remove refuses it).
	for d := filepath.Dir(path); d != root; d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return nil
}

// worktree is one entry of `git worktree list`.
type worktree struct {
	path     string
	branch   string // without refs/heads/; empty when detached
	locked   string // the lock's reason; "locked" when it has none
	prunable bool   // its directory is gone
}

func list(ctx context.Context, root string) ([]worktree, error) {
	out, err := git(ctx, root, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var wts []worktree
	var cur *worktree
	for _, f := range splitZ(out) {
		key, val, _ := strings.Cut(f, " ")
		switch key {
		case "":
			cur = nil
		case "worktree":
			wts = append(wts, worktree{path: canonical(val)})
			cur = &wts[len(wts)-1]
		case "branch":
			if cur != nil {
				cur.branch = strings.TrimPrefix(val, "refs/heads/")
			}
		case "locked":
			if cur != nil {
				cur.locked = cmp.Or(val, "locked")
			}
		case "prunable":
			if cur != nil {
				cur.prunable = true
			}
		}
	}
	return wts, nil
}

// canonical resolves symlinks in a path that exists, so paths git recorded
// compare equal to the ones built here from the resolved top.
func canonical(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return filepath.Clean(path)
}

// topLevel checks that repo is the top of a (non-bare) git working tree
// and returns it absolute with its symlinks resolved.
func topLevel(ctx context.Context, repo string) (string, error) {
	if repo == "" {
		return "", fmt.Errorf("repository: no path given: %w", ErrNotRepository)
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return "", fmt.Errorf("repository %s: %w", repo, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("repository %s: %w: %w", abs, ErrNotRepository, err)
	}
	bare, err := gitLine(ctx, real, "rev-parse", "--is-bare-repository")
	switch {
	case err != nil && exitCode(err) < 0:
		return "", err // git did not run, or was stopped: nothing is known
	case err != nil:
		return "", fmt.Errorf("repository %s: %w", real, ErrNotRepository)
	case bare == "true":
		return "", fmt.Errorf("repository %s is bare: a run needs a working tree: %w", real, ErrNotRepository)
	}
	top, err := gitLine(ctx, real, "rev-parse", "--show-toplevel")
	switch {
	case err != nil && exitCode(err) < 0:
		return "", err
	case err != nil:
		return "", fmt.Errorf("repository %s: %w (%w)", real, ErrNotRepository, err)
	case canonical(top) != real:
		return "", fmt.Errorf("repository %s: %w: it is inside %s", real, ErrNotRepository, top)
	}
	return real, nil
}

// checkComponent checks a slug or a task id, which become folder names.
func checkComponent(kind, s string) error {
	if !componentRE.MatchString(s) {
		return fmt.Errorf("%s %q must be 1-64 characters of A-Z a-z 0-9 _ -: %w", kind, s, ErrInvalidName)
	}
	return nil
}

// checkBranchName applies git's own rule for branch names; a leading
// hyphen, which git would read as an option, is refused too.
func checkBranchName(ctx context.Context, root, name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return fmt.Errorf("branch name %q: %w", name, ErrInvalidName)
	}
	got, err := gitLine(ctx, root, "check-ref-format", "--branch", name)
	if ctx.Err() != nil {
		return err
	}
	if err != nil || got != name {
		return fmt.Errorf("branch name %q is not a valid git branch name: %w", name, ErrInvalidName)
	}
	return nil
}

// checkNoClash refuses a new branch that an existing one keeps from
// being made: git stores a branch as a file under refs/heads/, so a/b
// cannot exist beside a branch a, nor beside a/b/c.
func checkNoClash(ctx context.Context, root, branch string) error {
	parts := strings.Split(branch, "/")
	for i := 1; i < len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		tip, err := branchTip(ctx, root, prefix)
		if err != nil {
			return err
		}
		if tip != "" {
			return fmt.Errorf("branch %s cannot be made beside the branch %s: %w", branch, prefix, ErrInvalidName)
		}
	}
	// A pattern matches the ref itself and every ref below it.
	out, err := gitLine(ctx, root, "for-each-ref", "--count=1", "--format=%(refname)", "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if below := strings.TrimPrefix(out, "refs/heads/"); below != "" && below != branch {
		return fmt.Errorf("branch %s cannot be made beside the branch %s: %w", branch, below, ErrInvalidName)
	}
	return nil
}

// branchTip is the commit a local branch points to, or "" when the branch
// does not exist.
func branchTip(ctx context.Context, root, branch string) (string, error) {
	out, err := gitLine(ctx, root, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", fmt.Errorf("branch %s: %w", branch, err)
	}
	return out, nil
}

// featureTip is branchTip for a branch that must exist.
func featureTip(ctx context.Context, root, featureBranch string) (string, error) {
	if err := checkBranchName(ctx, root, featureBranch); err != nil {
		return "", err
	}
	tip, err := branchTip(ctx, root, featureBranch)
	if err == nil && tip == "" {
		err = fmt.Errorf("feature branch %s does not exist in %s (Prepare makes it): %w", featureBranch, root, ErrUnknownRevision)
	}
	return tip, err
}

// resolveCommit resolves any revision (a branch, a tag, a hash, HEAD) to
// the commit it names.
func resolveCommit(ctx context.Context, root, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("%q: %w", rev, ErrUnknownRevision)
	}
	out, err := gitLine(ctx, root, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		if ctx.Err() == nil && exitCode(err) == 1 {
			return "", fmt.Errorf("%q is not a commit in %s: %w", rev, root, ErrUnknownRevision)
		}
		return "", err
	}
	return out, nil
}
