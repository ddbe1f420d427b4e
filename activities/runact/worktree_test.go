package runact

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/worktree"
	"karvi-edda-temporal/mapping"
)

// gitRepo makes a repository with one commit at dir, the host's git
// configuration shut out for the whole test.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	runGit(t, dir, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644))
	runGit(t, dir, "add", "README")
	runGit(t, dir, "commit", "-q", "-m", "init")
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func requireInvalidRepo(t *testing.T, err error, mentions string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %v", err)
	require.Equal(t, ErrInvalidRepo, appErr.Type())
	require.True(t, appErr.NonRetryable(), "%v", err)
	require.Contains(t, err.Error(), mentions)
}

// A run's repository from the activities' side: prepared by a path
// relative to the work root, a worktree per task that TaskCwd accepts as
// the conductor's working directory, merges (one clean, one a
// conflict), removal; every call twice, as a retry would make it.
func TestWorktreeActivities(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	gitRepo(t, filepath.Join(root, "repos", "app"))
	a := &GitActivities{Config: activities.Config{WorkRoot: root}}
	layout, err := activities.NewLayout(root)
	require.NoError(t, err)
	repo := filepath.Join(layout.Root(), "repos", "app")

	var prep PrepareRepoResult
	for i := range 2 {
		prep, err = a.PrepareRepo(ctx, PrepareRepoRequest{Repo: "repos/app", FeatureBranch: "feature/profiles"})
		require.NoError(t, err)
		require.Equal(t, repo, prep.Repo)
		require.Equal(t, i == 0, prep.Created)
	}
	exclude, err := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	require.NoError(t, err)
	require.Contains(t, string(exclude), "/.worktrees/\n/.edda/conductor/\n")

	wts := map[string]CreateWorktreeResult{}
	for _, task := range []string{"a", "b", "a", "b"} {
		res, err := a.CreateWorktree(ctx, CreateWorktreeRequest{Repo: prep.Repo, Slug: "profiles", TaskID: task, FeatureBranch: "feature/profiles"})
		require.NoError(t, err)
		if prev, ok := wts[task]; ok {
			require.Equal(t, prev, res, "a second call returns the same worktree")
		}
		wts[task] = res
		require.Equal(t, filepath.Join(repo, ".worktrees", "profiles", task), res.Path)
		require.Equal(t, filepath.Join(".worktrees", "profiles", task), res.RelPath)
		require.Equal(t, "feature/profiles-"+task, res.Branch)

		cwd, err := layout.TaskCwd(mapping.DispatchPlan{TaskID: task, WorkingDir: res.Path})
		require.NoError(t, err, "the worktree must do as the conductor's working directory")
		require.Equal(t, res.Path, cwd)
	}
	// The conductor's state in the worktree is no change of the task's.
	require.NoError(t, os.MkdirAll(filepath.Join(wts["a"].Path, ".edda", "conductor", "p"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wts["a"].Path, ".edda", "conductor", "p", "state.json"), []byte("{}"), 0o644))
	for task, text := range map[string]string{"a": "from a\n", "b": "from b\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(wts[task].Path, "README"), []byte(text), 0o644))
		runGit(t, wts[task].Path, "add", "-A")
		runGit(t, wts[task].Path, "commit", "-q", "-m", task)
	}

	merge := func(task string) MergeTaskResult {
		t.Helper()
		res, err := a.MergeTask(ctx, MergeTaskRequest{Repo: "repos/app", Slug: "profiles", FeatureBranch: "feature/profiles", Branch: wts[task].Branch, Message: "Merge task " + task})
		require.NoError(t, err)
		return res
	}
	ma := merge("a")
	require.True(t, ma.Merged)
	require.Equal(t, []string{"README"}, ma.Touched, "the conductor's state is not part of the task's work")
	require.Equal(t, ma, merge("a"))
	mb := merge("b")
	require.Equal(t, MergeTaskResult{ConflictFiles: []string{"README"}, Touched: []string{"README"}}, mb)
	require.Equal(t, ma.Commit, runGit(t, repo, "rev-parse", "feature/profiles"))
	require.Equal(t, "main", runGit(t, repo, "branch", "--show-current"))

	for _, path := range []string{wts["a"].RelPath, wts["a"].Path, worktree.IntegrationPath(repo, "profiles")} {
		require.NoError(t, a.RemoveWorktree(ctx, RemoveWorktreeRequest{Repo: prep.Repo, Path: path}))
	}
	_, err = os.Stat(wts["a"].Path)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(wts["b"].Path)
	require.NoError(t, err, "b's worktree stays for a person to rebase")
}

func TestWorktreeActivitiesRefuse(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	outside := t.TempDir()
	gitRepo(t, filepath.Join(outside, "app"))
	gitRepo(t, filepath.Join(root, "app"))
	require.NoError(t, os.Symlink(filepath.Join(outside, "app"), filepath.Join(root, "link")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "plain"), 0o755))
	a := &GitActivities{Config: activities.Config{WorkRoot: root}}

	for _, repo := range []string{filepath.Join(outside, "app"), "../" + filepath.Base(outside) + "/app", "link", "/"} {
		_, err := a.PrepareRepo(ctx, PrepareRepoRequest{Repo: repo, FeatureBranch: "f"})
		requireInvalidRepo(t, err, "repository \""+repo+"\" is outside the work root")
		_, err = a.CreateWorktree(ctx, CreateWorktreeRequest{Repo: repo, Slug: "s", TaskID: "a", FeatureBranch: "f"})
		requireInvalidRepo(t, err, "outside the work root")
		_, err = a.MergeTask(ctx, MergeTaskRequest{Repo: repo, Slug: "s", FeatureBranch: "f", Branch: "f-a"})
		requireInvalidRepo(t, err, "outside the work root")
		requireInvalidRepo(t, a.RemoveWorktree(ctx, RemoveWorktreeRequest{Repo: repo, Path: ".worktrees/s/a"}), "outside the work root")
	}
	out, err := exec.Command("git", "-C", filepath.Join(outside, "app"), "branch", "--list", "f").Output()
	require.NoError(t, err)
	require.Empty(t, string(out), "a refused repository was changed")

	_, err = a.PrepareRepo(ctx, PrepareRepoRequest{FeatureBranch: "f"})
	requireInvalidRepo(t, err, "no path given")
	_, err = a.PrepareRepo(ctx, PrepareRepoRequest{Repo: "plain", FeatureBranch: "f"})
	requireInvalidRepo(t, err, "not the top of a git working tree")
	_, err = a.PrepareRepo(ctx, PrepareRepoRequest{Repo: "app", FeatureBranch: "f", Base: "nope"})
	requireInvalidRepo(t, err, `"nope" is not a commit`)
	_, err = a.CreateWorktree(ctx, CreateWorktreeRequest{Repo: "app", Slug: "s", TaskID: "a", FeatureBranch: "f"})
	requireInvalidRepo(t, err, "feature branch f does not exist")

	// .worktrees linked out of the root: no worktree is made there.
	_, err = a.PrepareRepo(ctx, PrepareRepoRequest{Repo: "app", FeatureBranch: "f"})
	require.NoError(t, err)
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "app", ".worktrees")))
	_, err = a.CreateWorktree(ctx, CreateWorktreeRequest{Repo: "app", Slug: "s", TaskID: "a", FeatureBranch: "f"})
	requireInvalidRepo(t, err, "resolves outside the work root")
	_, err = a.MergeTask(ctx, MergeTaskRequest{Repo: "app", Slug: "s", FeatureBranch: "f", Branch: "main"})
	requireInvalidRepo(t, err, "resolves outside the work root")

	// A cancelled context is no reason to give up for good.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = a.PrepareRepo(cancelled, PrepareRepoRequest{Repo: "app", FeatureBranch: "g"})
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "cancelled: %v", err)
}
