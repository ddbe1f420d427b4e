package workflows

import "fmt"

// prepareWorktree gives a task its worktree before its first attempt, when
// the run works in a repository.
func (r *runFlow) prepareWorktree(id string) error {
	if r.st.Repo == nil {
		return nil
	}
	return fmt.Errorf("task %s: worktrees are not wired yet", id)
}

// mergeCompleted merges the branches of completed tasks, one at a time.
func (r *runFlow) mergeCompleted() error { return nil }

func (r *runFlow) retryMerge(id string, apply bool) error {
	return fmt.Errorf("task %s: merge retry not wired yet", id)
}
