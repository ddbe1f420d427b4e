// Package worktree gives each task of a run its own git worktree and
// merges the task's branch into the run's feature branch when the task
// is done. It runs the git binary; every command is bounded by a context.
//
// Layout, at the top of the repository:
//
//	.worktrees/<slug>/<task>         a task's worktree, on branch <feature>-<task>
//	.worktrees/<slug>/.integration   the run's merges happen here, on <feature>
//
// The user's checkout is never touched: not its branch, its index or its
// files. Merging needs a checkout of the feature branch, and the
// integration worktree is that checkout; git then also refuses to check
// the feature branch out anywhere else while the run holds it. Prepare
// lists /.worktrees/ in .git/info/exclude (the repository's own ignore
// file, not a tracked .gitignore), so `git status` stays clean.
//
// Task branches are <feature>-<task>, not <feature>/<task>: git keeps a
// branch as a file under refs/heads/, so the branch feature/x stops
// feature/x/<task> from existing (it would need feature/x to be a
// directory).
//
// Every operation is idempotent, because an activity may run again after
// its worker died half way: Prepare and Create find what an earlier call
// made and repair what it left half made, Merge recognises a branch it
// merged already, Remove succeeds on what is gone.
//
// What the host's git setup could change is pinned per command, never in
// a config file: the merge commits' identity (CommitterName,
// CommitterEmail), hooks off (the user's hooks are for the user's
// commits), no automatic gc, and no GIT_DIR-like variable from the
// worker's environment.
package worktree
