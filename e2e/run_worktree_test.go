//go:build realserver

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/testkit/testrig"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=person", "-c", "user.email=person@localhost"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// A run in a real git repository: each task on its own worktree and
// branch, a dependent branched after its dependency merged, branches merged
// into the feature branch as tasks complete, the paths two tasks changed
// reported, a conflict ending in needs-human-rebase with the file named and
// the dependent waiting, and a person's rebase and retry merging it after
// all. The user's checkout is never touched.
func TestRunWorktreesMergesAndConflict(t *testing.T) {
	t.Parallel()
	r := testrig.New(t, testrig.Options{Scenario: "checks=pass delay=50ms"})
	repo := filepath.Join(r.WorkRoot, "repos", "app")
	require.NoError(t, testrig.GitWorkspace(repo))
	userBranch := git(t, repo, "rev-parse", "--abbrev-ref", "HEAD")
	userHead := git(t, repo, "rev-parse", "HEAD")

	runFile := `{"slug":"wt","title":"Worktrees","concurrency":4,"tasks":[
	 {"id":"wt-a","title":"A","description":"[sim phase=implement edit=a.txt]"},
	 {"id":"wt-b","title":"B","depends":["wt-a"],"description":"[sim phase=implement edit=b.txt]"},
	 {"id":"wt-c","title":"C","description":"[sim phase=implement edit=shared.txt]"},
	 {"id":"wt-d","title":"D","description":"[sim phase=implement edit=shared.txt delay=2s]"},
	 {"id":"wt-e","title":"E","depends":["wt-d"]},
	 {"id":"wt-s","title":"S","description":"[sim phase=implement hang]"}]}`
	wr, _ := r.StartRun(runapi.RunInput{Run: json.RawMessage(runFile), Repo: "repos/app"})
	task := func(v runapi.View, id string) *runstatus.Task { return v.Status.Tasks[id] }

	// A merged task is done before its worktree is removed (pending-cleanup
	// until then): wait for the removals too, however slow the server.
	v := r.WaitRun("wt", "d in conflict, b done, merged worktrees removed", func(v runapi.View) bool {
		for _, id := range []string{"wt-a", "wt-b", "wt-c"} {
			if task(v, id).WorktreeStatus != runstatus.WorktreeCleaned {
				return false
			}
		}
		return task(v, "wt-d").Status == runstatus.TaskNeedsHumanRebase && task(v, "wt-b").Status == runstatus.TaskDone
	})
	feature := "feature/wt"
	require.Equal(t, feature, v.Status.FeatureBranch)
	d := task(v, "wt-d")
	require.Equal(t, []string{"shared.txt"}, d.ConflictFiles)
	require.Equal(t, runstatus.WorktreeActive, d.WorktreeStatus, "a task in conflict keeps its worktree")
	require.Equal(t, runstatus.TaskQueued, task(v, "wt-e").Status, "a dependent waits for the merge")
	for _, id := range []string{"wt-a", "wt-b", "wt-c"} {
		tk := task(v, id)
		require.Equal(t, runstatus.WorktreeCleaned, tk.WorktreeStatus, id)
		require.False(t, tk.MergedAt.IsZero(), id)
		require.Equal(t, filepath.Join(".worktrees", "wt", id), tk.Worktree, id)
		_, err := os.Stat(filepath.Join(repo, tk.Worktree))
		require.True(t, os.IsNotExist(err), "%s: merged worktree not removed", id)
	}
	// b was branched after a merged: its branch holds a's work.
	require.Contains(t, git(t, repo, "show", task(v, "wt-b").Branch+":a.txt"), "karvi-wt-a")
	// The feature branch has a, b and c's work, and not d's.
	files := git(t, repo, "ls-tree", "--name-only", feature)
	for _, f := range []string{"a.txt", "b.txt", "shared.txt"} {
		require.Contains(t, files, f)
	}
	require.NotContains(t, git(t, repo, "show", feature+":shared.txt"), "karvi-wt-d")
	// The user's checkout is as it was.
	require.Equal(t, userBranch, git(t, repo, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Equal(t, userHead, git(t, repo, "rev-parse", "HEAD"))
	require.Empty(t, git(t, repo, "status", "--porcelain"))
	// status.json is in the repository too.
	data, err := os.ReadFile(filepath.Join(repo, ".karimo", "prds", "wt", "status.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `"needs-human-rebase"`)

	// A person brings d's branch up to date with the feature branch,
	// keeping both lines, and asks for the merge again.
	wtD := filepath.Join(repo, d.Worktree)
	cmd := exec.Command("git", "merge", feature)
	cmd.Dir = wtD
	_ = cmd.Run() // conflicts, as the run said
	both := git(t, wtD, "show", feature+":shared.txt") + "\n" + git(t, wtD, "show", "HEAD:shared.txt") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(wtD, "shared.txt"), []byte(both), 0o644))
	git(t, wtD, "add", "shared.txt")
	git(t, wtD, "commit", "-q", "--no-edit")
	require.NoError(t, r.UpdateRun("wt", runapi.UpdateRetry, runapi.TaskRequest{Task: "wt-d"}))
	v = r.WaitRun("wt", "e done", func(v runapi.View) bool { return task(v, "wt-e").Status == runstatus.TaskDone })
	require.Equal(t, runstatus.TaskDone, task(v, "wt-d").Status)
	require.Contains(t, git(t, repo, "show", feature+":shared.txt"), "karvi-wt-d")
	// c and d both changed shared.txt: the view says so.
	require.Contains(t, v.Overlaps, runapi.Overlap{Path: "shared.txt", Tasks: []string{"wt-c", "wt-d"}})

	require.NoError(t, r.UpdateRun("wt", runapi.UpdateAbort, runapi.AbortRequest{Reason: "done looking"}))
	require.Equal(t, runstatus.RunPartial, r.RunResult(wr, time.Minute).Status)
	_, err = os.Stat(filepath.Join(repo, ".worktrees", "wt", ".integration"))
	require.True(t, os.IsNotExist(err), "the run's integration worktree outlived it")
}
