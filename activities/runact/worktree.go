package runact

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/worktree"
)

// GitActivities are the run's git steps: prepare the feature branch, give
// each task a worktree, merge its branch back, remove the worktree. They
// need only the worker's configuration (the work root).
type GitActivities struct {
	Config activities.Config
}

// ErrInvalidRepo: a run's repository cannot be used as the request names
// it: outside the work root, not the top of a git working tree, a base or
// branch that does not exist, a name git refuses, a branch held by a
// checkout of the user's. Retrying cannot help; a person has to.
const ErrInvalidRepo = "InvalidRepo"

// conductorState is where the conductor keeps a plan's state in its
// working directory. In a task's worktree that would be untracked files
// an agent's `git add -A` commits and the merge carries into the feature
// branch; the repository's exclude list keeps it out.
const conductorState = "/.edda/conductor/"

// runStatusCopy is where WriteRunStatus puts the run's status.json in the
// repository; written on every change, it would otherwise show in the
// user's `git status` as an untracked file for the whole run.
const runStatusCopy = "/.karimo/prds/*/status.json"

// PrepareRepoRequest readies a run's repository.
type PrepareRepoRequest struct {
	// Repo is the repository, inside the work root; a relative path is
	// taken from the work root.
	Repo          string `json:"repo"`
	FeatureBranch string `json:"featureBranch"`
	// Base is what a new feature branch starts from: a branch, tag or
	// commit; the repository's HEAD when empty.
	Base string `json:"base,omitempty"`
}

// PrepareRepoResult is the repository ready for the run.
type PrepareRepoResult struct {
	// Repo is the repository's absolute path, symlinks resolved.
	Repo string `json:"repo"`
	// Commit is the feature branch's tip.
	Commit string `json:"commit"`
	// Created: the feature branch was made from the base just now.
	Created bool `json:"created"`
}

// CreateWorktreeRequest asks for a task's worktree.
type CreateWorktreeRequest struct {
	Repo          string `json:"repo"`
	Slug          string `json:"slug"`
	TaskID        string `json:"taskId"`
	FeatureBranch string `json:"featureBranch"`
}

// CreateWorktreeResult is a task's worktree.
type CreateWorktreeResult struct {
	// Path is the worktree, absolute: the task's working directory (the
	// dispatch's workingDir).
	Path string `json:"path"`
	// RelPath is Path from the repository's top, as status.json records
	// it (.worktrees/<slug>/<task>).
	RelPath string `json:"relPath"`
	// Branch is the task's branch, <featureBranch>-<taskId>.
	Branch string `json:"branch"`
}

// MergeTaskRequest asks for a task's branch to be merged into the
// feature branch.
type MergeTaskRequest struct {
	Repo          string `json:"repo"`
	Slug          string `json:"slug"`
	FeatureBranch string `json:"featureBranch"`
	Branch        string `json:"branch"`
	// Message is the merge commit's message; git's usual one when empty.
	Message string `json:"message,omitempty"`
}

// MergeTaskResult is what the merge did. A conflict is a result, not an
// error: Merged false, ConflictFiles set, the feature branch unchanged.
type MergeTaskResult struct {
	Merged bool `json:"merged"`
	// Commit is the merge commit (the feature tip when the branch brought
	// nothing new).
	Commit        string   `json:"commit,omitempty"`
	ConflictFiles []string `json:"conflictFiles,omitempty"`
	// Touched are the paths the task's branch changed, for
	// worktree.Overlaps.
	Touched []string `json:"touched,omitempty"`
}

// RemoveWorktreeRequest asks for a worktree to go.
type RemoveWorktreeRequest struct {
	Repo string `json:"repo"`
	// Path is a worktree under <repo>/.worktrees/, absolute or from the
	// repository's top (CreateWorktreeResult's Path or RelPath, or
	// worktree.IntegrationPath when the run is over).
	Path string `json:"path"`
}

// PrepareRepo makes sure the feature branch exists (made from Base when
// missing) and that the run's worktrees, the conductor's state and the
// run's status.json stay out of `git status`. The user's checkout is not touched. Idempotent.
func (a *GitActivities) PrepareRepo(ctx context.Context, req PrepareRepoRequest) (PrepareRepoResult, error) {
	defer beat(ctx)()
	repo, err := a.repoPath(req.Repo)
	if err != nil {
		return PrepareRepoResult{}, err
	}
	p, err := worktree.Prepare(ctx, repo, req.FeatureBranch, req.Base)
	if err != nil {
		return PrepareRepoResult{}, worktreeError(err)
	}
	if err := worktree.Exclude(ctx, p.Repo, conductorState, runStatusCopy); err != nil {
		return PrepareRepoResult{}, worktreeError(err)
	}
	return PrepareRepoResult{Repo: p.Repo, Commit: p.Commit, Created: p.Created}, nil
}

// CreateWorktree gives a task its worktree, on its own branch from the
// feature branch's tip; a retry finds it there, or repairs it.
func (a *GitActivities) CreateWorktree(ctx context.Context, req CreateWorktreeRequest) (CreateWorktreeResult, error) {
	defer beat(ctx)()
	repo, err := a.repoPath(req.Repo)
	if err != nil {
		return CreateWorktreeResult{}, err
	}
	if err := a.insideRoot(worktree.TaskPath(repo, req.Slug, req.TaskID)); err != nil {
		return CreateWorktreeResult{}, err
	}
	wt, err := worktree.Create(ctx, repo, req.Slug, req.TaskID, req.FeatureBranch)
	if err != nil {
		return CreateWorktreeResult{}, worktreeError(err)
	}
	rel, err := filepath.Rel(repo, wt.Path)
	if err != nil {
		return CreateWorktreeResult{}, err
	}
	return CreateWorktreeResult{Path: wt.Path, RelPath: rel, Branch: wt.Branch}, nil
}

// MergeTask merges a task's branch into the feature branch (--no-ff) in
// the run's integration worktree. Merges of one run wait for each other.
func (a *GitActivities) MergeTask(ctx context.Context, req MergeTaskRequest) (MergeTaskResult, error) {
	defer beat(ctx)()
	repo, err := a.repoPath(req.Repo)
	if err != nil {
		return MergeTaskResult{}, err
	}
	if err := a.insideRoot(worktree.IntegrationPath(repo, req.Slug)); err != nil {
		return MergeTaskResult{}, err
	}
	res, err := worktree.Merge(ctx, repo, req.Slug, req.FeatureBranch, req.Branch, req.Message)
	if err != nil {
		return MergeTaskResult{}, worktreeError(err)
	}
	return MergeTaskResult{Merged: res.Merged, Commit: res.Commit, ConflictFiles: res.ConflictFiles, Touched: res.Touched}, nil
}

// RemoveWorktree removes a worktree; its branch stays. Removing one that
// is gone succeeds.
func (a *GitActivities) RemoveWorktree(ctx context.Context, req RemoveWorktreeRequest) error {
	defer beat(ctx)()
	repo, err := a.repoPath(req.Repo)
	if err != nil {
		return err
	}
	return worktreeError(worktree.Remove(ctx, repo, req.Path))
}

// repoPath resolves a run's repository against the work root and refuses
// one outside it: its worktrees become conductors' working directories,
// which must lie inside the root (Layout.TaskCwd).
func (a *GitActivities) repoPath(repo string) (string, error) {
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	if err != nil {
		return "", err
	}
	if repo == "" {
		return "", invalidRepo(errors.New("repository: no path given"))
	}
	path := repo
	if !filepath.IsAbs(path) {
		path = filepath.Join(layout.Root(), path)
	}
	path = activities.ResolveExisting(filepath.Clean(path))
	if !layout.Contains(path) {
		return "", invalidRepo(fmt.Errorf("repository %q is outside the work root %s: its worktrees would be task working directories outside it", repo, layout.Root()))
	}
	return path, nil
}

// insideRoot refuses a worktree path that leaves the work root through a
// symlink on the way (.worktrees linked elsewhere, say).
func (a *GitActivities) insideRoot(path string) error {
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	if err != nil {
		return err
	}
	if !layout.Contains(activities.ResolveExisting(filepath.Clean(path))) {
		return invalidRepo(fmt.Errorf("worktree %s resolves outside the work root %s", path, layout.Root()))
	}
	return nil
}

// worktreeError makes the errors no retry can mend non-retryable; the
// rest (git killed by a timeout, a lock held by a crashed command, a full
// disk) may pass on the next attempt.
func worktreeError(err error) error {
	for _, e := range []error{worktree.ErrNotRepository, worktree.ErrUnknownRevision, worktree.ErrInvalidName, worktree.ErrInUse} {
		if errors.Is(err, e) {
			return invalidRepo(err)
		}
	}
	return err
}

func invalidRepo(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidRepo, err)
}

// beat heartbeats while a git command runs (a checkout or a merge in a
// large repository takes a while); outside an activity, as in unit
// tests, there is nobody to tell.
func beat(ctx context.Context) func() {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	return activities.Heartbeat(ctx, activities.HeartbeatEvery)
}
