package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MergeResult is what Merge did with a task's branch.
type MergeResult struct {
	// Merged: the feature branch now holds the task's branch.
	Merged bool
	// Commit is the merge commit on the feature branch. When the branch
	// brought nothing new (the task committed nothing) no merge commit is
	// made, and Commit is the feature branch's tip.
	Commit string
	// ConflictFiles, when Merged is false, are the paths git could not
	// merge, sorted. The feature branch is then as it was.
	ConflictFiles []string
	// Touched are the paths the task's branch changed since it forked from
	// the feature branch, sorted; a rename counts as both its paths.
	Touched []string
}

// Merge merges a task's branch into the feature branch with a merge
// commit (--no-ff) whose message is message (git's usual one when empty).
// It merges in the run's integration worktree (IntegrationPath), checked
// out on the feature branch, so the user's checkout is never touched. A
// conflict is a result: ConflictFiles names the paths, the merge is
// undone, the feature branch does not move. Merge is idempotent: a
// branch that is merged already returns Merged and the commit that
// merged it.
//
// Merges of one run are serialised by a lock file: two at once in the
// same integration worktree would spoil each other, and an activity that
// timed out may still be running when its retry starts.
func Merge(ctx context.Context, repo, slug, featureBranch, branch, message string) (MergeResult, error) {
	root, err := topLevel(ctx, repo)
	if err != nil {
		return MergeResult{}, err
	}
	if err := checkComponent("slug", slug); err != nil {
		return MergeResult{}, err
	}
	if _, err := featureTip(ctx, root, featureBranch); err != nil {
		return MergeResult{}, err
	}
	if err := checkBranchName(ctx, root, branch); err != nil {
		return MergeResult{}, err
	}
	if branch == featureBranch {
		return MergeResult{}, fmt.Errorf("merge %s into itself: %w", branch, ErrInvalidName)
	}
	tip, err := branchTip(ctx, root, branch)
	if err != nil {
		return MergeResult{}, err
	}
	if tip == "" {
		return MergeResult{}, fmt.Errorf("merge: branch %s does not exist in %s: %w", branch, root, ErrUnknownRevision)
	}
	unlock, err := lock(ctx, filepath.Join(root, Dir, slug, integration+".lock"))
	if err != nil {
		return MergeResult{}, err
	}
	defer unlock()

	dir := IntegrationPath(root, slug)
	if err := integrationReady(ctx, root, dir, featureBranch); err != nil {
		return MergeResult{}, err
	}
	feature, err := gitLine(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return MergeResult{}, err
	}
	if _, err := git(ctx, root, "merge-base", "--is-ancestor", tip, feature); err == nil {
		return mergedAlready(ctx, root, feature, tip)
	} else if exitCode(err) != 1 {
		return MergeResult{}, err
	}

	res := MergeResult{}
	if res.Touched, err = touched(ctx, root, feature, tip); err != nil {
		return MergeResult{}, err
	}
	if message == "" {
		message = fmt.Sprintf("Merge branch '%s' into %s", branch, featureBranch)
	}
	// The commit, not the branch's name: a tag of the same name would win
	// over the branch, and what is merged must be what Touched describes.
	_, mergeErr := git(ctx, dir, "merge", "--no-ff", "--no-edit", "-m", message, tip)
	if mergeErr == nil {
		res.Merged = true
		res.Commit, err = gitLine(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
		return res, err
	}
	if ctx.Err() != nil {
		return MergeResult{}, mergeErr
	}
	out, err := git(ctx, dir, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return MergeResult{}, err
	}
	res.ConflictFiles = sortedUnique(splitZ(out))
	// With nothing uncommitted before the merge (integrationReady saw to
	// that), reset --hard is what merge --abort does, and it also clears a
	// merge that stopped before recording MERGE_HEAD.
	if _, err := git(ctx, dir, "reset", "--hard", "--quiet"); err != nil {
		return MergeResult{}, fmt.Errorf("undo the merge of %s: %w", branch, err)
	}
	if len(res.ConflictFiles) == 0 {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", branch, featureBranch, mergeErr)
	}
	if now, err := branchTip(ctx, root, featureBranch); err != nil || now != feature {
		return MergeResult{}, fmt.Errorf("merge %s into %s: the feature branch moved from %s to %s after a conflict (%v)", branch, featureBranch, feature, now, err)
	}
	return res, nil
}

// integrationReady makes dir the run's integration worktree, on the
// feature branch, with nothing in it but the branch's tip: what a merge
// killed half way left behind (its lock, a merge in progress, files) is
// cleared. Only Merge works there, under its lock, so a lock file found
// there is stale.
func integrationReady(ctx context.Context, root, dir, featureBranch string) error {
	ok, err := ensure(ctx, root, dir, featureBranch)
	if err != nil {
		return fmt.Errorf("integration worktree: %w", err)
	}
	if !ok {
		if _, err := git(ctx, root, "worktree", "add", "--quiet", dir, featureBranch); err != nil {
			return fmt.Errorf("integration worktree: %w", err)
		}
		return nil
	}
	gitDir, err := gitLine(ctx, dir, "rev-parse", "--path-format=absolute", "--git-dir")
	if err != nil {
		return fmt.Errorf("integration worktree: %w", err)
	}
	for _, name := range []string{"index.lock", "HEAD.lock"} {
		if err := os.Remove(filepath.Join(gitDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("integration worktree: %w", err)
		}
	}
	if _, err := git(ctx, dir, "reset", "--hard", "--quiet"); err != nil {
		return fmt.Errorf("integration worktree: %w", err)
	}
	if _, err := git(ctx, dir, "clean", "-ffdxq"); err != nil {
		return fmt.Errorf("integration worktree: %w", err)
	}
	return nil
}

// mergedAlready answers for a branch whose tip the feature branch holds:
// the merge commit that took it in (the oldest commit since the tip that
// has it as a second parent), or, when there is none, the feature tip.
func mergedAlready(ctx context.Context, root, feature, tip string) (MergeResult, error) {
	out, err := git(ctx, root, "rev-list", "--parents", "--ancestry-path", "^"+tip, feature)
	if err != nil {
		return MergeResult{}, err
	}
	res := MergeResult{Merged: true, Commit: feature}
	var firstParent string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 2 && slices.Contains(f[2:], tip) {
			res.Commit, firstParent = f[0], f[1]
		}
	}
	if firstParent != "" {
		if res.Touched, err = touched(ctx, root, firstParent, tip); err != nil {
			return MergeResult{}, err
		}
	}
	return res, nil
}

// touched lists the paths tip changed since it forked from feature.
func touched(ctx context.Context, root, feature, tip string) ([]string, error) {
	base, err := gitLine(ctx, root, "merge-base", feature, tip)
	if err != nil {
		if exitCode(err) == 1 {
			return nil, fmt.Errorf("commit %s shares no history with the feature branch at %s: %w", tip, feature, ErrUnknownRevision)
		}
		return nil, err
	}
	out, err := git(ctx, root, "diff", "--name-only", "--no-renames", "-z", base, tip, "--")
	if err != nil {
		return nil, err
	}
	return sortedUnique(splitZ(out)), nil
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// lock takes an exclusive lock on path (made if missing) and returns its
// release. It waits for the holder as long as ctx allows. The lock goes
// with the process, so a worker that dies holds nothing.
func lock(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	release := func() { f.Close() }
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return release, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			release()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			release()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
