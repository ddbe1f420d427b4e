package runflow

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/runact"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/internal/errtext"
	"karvi-edda-temporal/internal/worktree"
	"karvi-edda-temporal/runstatus"
)

// gitActs holds the git activities, referenced by method so their names
// stay the ones the worker registers.
var gitActs *runact.GitActivities

// When a run works in a git repository, each task works on a worktree of
// its own, branched from the feature branch once its dependencies merged;
// a completed task's branch is merged back, one merge at a time, before the
// task counts as done for its dependents. A conflict leaves the task to a
// person (needs-human-rebase); their `retry` merges again.

// gitStepFailsTask: a failed git step fails its task, and the run goes on.
// Asked only when a step failed, so histories without one replay as they
// were.
func (r *runFlow) gitStepFailsTask() bool {
	return workflow.GetVersion(r.ctx, versionGitStepFailsTask, workflow.DefaultVersion, 1) == 1
}

// failReady fails every task that could start now, for a reason that
// keeps them all from starting (their dependents are then blocked).
func (r *runFlow) failReady(reason string) {
	now := workflow.Now(r.ctx)
	for _, id := range r.st.Doc.Ready() {
		if err := r.st.Doc.TaskStarted(id, r.st.Doc.Tasks[id].Model, now); err != nil {
			r.log.Error("task not failed", "task", id, "error", err)
			continue
		}
		r.st.Tasks[id].LastError = reason
		r.taskFailed(id, reason)
	}
	r.log.Warn("tasks failed: the repository is not ready", "reason", reason)
}

// prepareRepo makes sure the feature branch exists, once per run.
func (r *runFlow) prepareRepo() error {
	repo := r.st.Repo
	if repo == nil || repo.Prepared {
		return nil
	}
	var res runact.PrepareRepoResult
	err := workflow.ExecuteActivity(gitOptions(r.ctx, "Prepare branch "+repo.FeatureBranch), gitActs.PrepareRepo,
		runact.PrepareRepoRequest{Repo: repo.Path, FeatureBranch: repo.FeatureBranch}).Get(r.ctx, &res)
	if err != nil {
		return fmt.Errorf("run %s: repository %s: %w", r.run.Slug, repo.Path, err)
	}
	repo.Path, repo.Prepared = res.Repo, true
	r.changed()
	return nil
}

// prepareWorktree gives a task its worktree before its first attempt; later
// attempts (loops, an upgrade, a retry) work on in the same one.
func (r *runFlow) prepareWorktree(id string) error {
	repo, t := r.st.Repo, r.st.Tasks[id]
	if repo == nil || t.Worktree != "" {
		return nil
	}
	var res runact.CreateWorktreeResult
	err := workflow.ExecuteActivity(gitOptions(r.ctx, "Create worktree for "+id), gitActs.CreateWorktree,
		runact.CreateWorktreeRequest{Repo: repo.Path, Slug: r.run.Slug, TaskID: id, FeatureBranch: repo.FeatureBranch}).Get(r.ctx, &res)
	if err != nil {
		return fmt.Errorf("task %s: worktree: %w", id, err)
	}
	t.Worktree, t.Branch = res.Path, res.Branch
	if err := r.st.Doc.WorktreeCreated(id, res.Branch, res.RelPath, workflow.Now(r.ctx)); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	r.changed()
	return nil
}

// mergeCompleted merges the branches of completed tasks into the feature
// branch, in run file order among those waiting, one at a time.
func (r *runFlow) mergeCompleted() error {
	if r.st.Repo == nil {
		return nil
	}
	for _, rt := range r.run.Tasks {
		if t := r.st.Tasks[rt.ID]; t.Merge && !r.st.Aborting {
			if err := r.merge(rt.ID); err != nil {
				if !r.gitStepFailsTask() {
					return err
				}
				// The branch stays, with its worktree, for a person; the
				// run's retry starts the task again.
				r.log.Warn("task failed: its merge failed", "task", rt.ID, "error", err)
				t.Merge, t.LastError = false, "merge: "+errtext.Root(err)
				r.taskFailed(rt.ID, t.LastError)
			}
		}
	}
	return nil
}

func (r *runFlow) merge(id string) error {
	repo, t := r.st.Repo, r.st.Tasks[id]
	var res runact.MergeTaskResult
	err := workflow.ExecuteActivity(gitOptions(r.ctx, "Merge "+t.Branch+" into "+repo.FeatureBranch), gitActs.MergeTask,
		runact.MergeTaskRequest{Repo: repo.Path, Slug: r.run.Slug, FeatureBranch: repo.FeatureBranch, Branch: t.Branch,
			Message: fmt.Sprintf("Merge task %s of run %s", id, r.run.Slug)}).Get(r.ctx, &res)
	if err != nil {
		return fmt.Errorf("task %s: merge %s: %w", id, t.Branch, err)
	}
	t.Merge = false
	now := workflow.Now(r.ctx)
	r.changed()
	if !res.Merged {
		r.log.Warn("merge conflict", "task", id, "files", res.ConflictFiles)
		t.LastError = fmt.Sprintf("merge into %s conflicts in %v", repo.FeatureBranch, res.ConflictFiles)
		return r.st.Doc.TaskEnded(id, runstatus.Conflict(res.ConflictFiles), 0, now)
	}
	if r.st.Touched == nil {
		r.st.Touched = map[string][]string{}
	}
	r.st.Touched[id] = res.Touched
	if err := r.st.Doc.TaskEnded(id, runstatus.Merged, 0, now); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if err := r.removeWorktree(id, t.Worktree); err != nil {
		if !r.gitStepFailsTask() {
			return err
		}
		// Merged all the same: the worktree stays, pending clean-up.
		r.log.Warn("merged task's worktree not removed", "task", id, "error", err)
		return nil
	}
	return r.st.Doc.WorktreeRemoved(id)
}

func (r *runFlow) removeWorktree(what, path string) error {
	err := workflow.ExecuteActivity(gitOptions(r.ctx, "Remove worktree of "+what), gitActs.RemoveWorktree,
		runact.RemoveWorktreeRequest{Repo: r.st.Repo.Path, Path: path}).Get(r.ctx, nil)
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", path, err)
	}
	return nil
}

// cleanUpRepo removes the run's integration worktree once the run ends;
// the worktrees of tasks that did not merge stay for a person to look at.
func (r *runFlow) cleanUpRepo() error {
	if r.st.Repo == nil || !r.st.Repo.Prepared {
		return nil
	}
	return r.removeWorktree("the run's merges", worktree.IntegrationPath(r.st.Repo.Path, r.run.Slug))
}

// retryMerge: a person rebased the task's branch; merge it again.
func (r *runFlow) retryMerge(id string, apply bool) error {
	if !apply {
		return r.check(func(s *runstatus.Status) error { return s.RetryMerge(id) })
	}
	if err := r.apply(func(s *runstatus.Status) error { return s.RetryMerge(id) }); err != nil {
		return err
	}
	r.st.Tasks[id].Merge = true
	return nil
}

// overlapsView is the paths more than one task changed, for the view.
func overlapsView(touched map[string][]string) []runapi.Overlap {
	var out []runapi.Overlap
	for _, o := range worktree.Overlaps(touched) {
		out = append(out, runapi.Overlap{Path: o.Path, Tasks: o.Tasks})
	}
	return out
}
