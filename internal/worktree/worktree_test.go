package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const feature = "feature/user-profiles"

// The whole life of two independent tasks and one that depends on both:
// each works in its own worktree, each branch is merged when its task is
// done, the dependent starts from a feature branch that holds both, and
// the user's checkout never changes.
func TestTwoTasksMergedThenADependent(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	user := userState(t, repo)
	mainTip := gitT(t, repo, "rev-parse", "main")

	p := prepare(t, repo, feature)
	if !p.Created || p.Commit != mainTip || p.Repo != repo {
		t.Fatalf("prepare: %+v, want a new branch at %s in %s", p, mainTip, repo)
	}
	a := create(t, repo, "profiles", "a", feature)
	b := create(t, repo, "profiles", "b", feature)
	if a.Path != filepath.Join(repo, ".worktrees", "profiles", "a") || a.Branch != "feature/user-profiles-a" {
		t.Fatalf("worktree a: %+v", a)
	}
	if got := gitT(t, a.Path, "rev-parse", "HEAD"); got != mainTip {
		t.Fatalf("a starts at %s, want the feature tip %s", got, mainTip)
	}
	if got := gitT(t, b.Path, "symbolic-ref", "--short", "HEAD"); got != b.Branch {
		t.Fatalf("b is on %s, want %s", got, b.Branch)
	}
	aTip := commit(t, a.Path, "task a", map[string]string{"src/a.go": "package a\n\nfunc A() {}\n", "src/shared.go": "package a // from a\n"})
	commit(t, b.Path, "task b", map[string]string{"src/b.go": "package b\n\nfunc B() {}\n", "docs/b.md": "b\n"})
	gitT(t, b.Path, "mv", "docs/guide.md", "docs/handbook.md")
	gitT(t, b.Path, "commit", "-q", "-m", "rename the guide")

	ma, err := Merge(ctx, repo, "profiles", feature, a.Branch, "Merge task a")
	if err != nil {
		t.Fatal(err)
	}
	if !ma.Merged || len(ma.ConflictFiles) > 0 || !slices.Equal(ma.Touched, []string{"src/a.go", "src/shared.go"}) {
		t.Fatalf("merge a: %+v", ma)
	}
	if parents := gitT(t, repo, "rev-list", "--parents", "-n1", ma.Commit); parents != ma.Commit+" "+mainTip+" "+aTip {
		t.Fatalf("merge a is not a --no-ff merge of %s into %s: %s", aTip, mainTip, parents)
	}
	if msg := gitT(t, repo, "log", "-1", "--format=%s|%an <%ae>", ma.Commit); msg != "Merge task a|"+CommitterName+" <"+CommitterEmail+">" {
		t.Errorf("merge commit: %s", msg)
	}
	mb := merge(t, repo, "profiles", feature, b.Branch)
	if !mb.Merged || !slices.Equal(mb.Touched, []string{"docs/b.md", "docs/guide.md", "docs/handbook.md", "src/b.go"}) {
		t.Fatalf("merge b: %+v", mb)
	}
	if got := gitT(t, repo, "rev-parse", feature); got != mb.Commit {
		t.Fatalf("feature at %s, want b's merge %s", got, mb.Commit)
	}
	if msg := gitT(t, repo, "log", "-1", "--format=%s", mb.Commit); msg != "Merge branch 'feature/user-profiles-b' into feature/user-profiles" {
		t.Errorf("default message: %s", msg)
	}

	// Every step again, as a retried activity would: the same answers,
	// nothing new on the feature branch.
	if again := prepare(t, repo, feature); again.Created || again.Commit != mb.Commit {
		t.Errorf("prepare again: %+v", again)
	}
	if again := create(t, repo, "profiles", "a", feature); again != a {
		t.Errorf("create again: %+v, want %+v", again, a)
	}
	if again := merge(t, repo, "profiles", feature, a.Branch); !again.Merged || again.Commit != ma.Commit || !slices.Equal(again.Touched, ma.Touched) {
		t.Errorf("merge a again: %+v, want %+v", again, ma)
	}
	if again := merge(t, repo, "profiles", feature, b.Branch); again.Commit != mb.Commit || !slices.Equal(again.Touched, mb.Touched) {
		t.Errorf("merge b again: %+v, want %+v", again, mb)
	}
	if got := gitT(t, repo, "rev-parse", feature); got != mb.Commit {
		t.Fatalf("a repeated merge moved the feature branch to %s", got)
	}

	c := create(t, repo, "profiles", "c", feature)
	if got := gitT(t, c.Path, "rev-parse", "HEAD"); got != mb.Commit {
		t.Errorf("dependent c starts at %s, want the merged tip %s", got, mb.Commit)
	}
	if _, err := os.Stat(filepath.Join(c.Path, "src", "shared.go")); err != nil {
		t.Errorf("c does not see a's work: %v", err)
	}
	if got := userState(t, repo); got != user {
		t.Errorf("the user's checkout changed\n got %s\nwant %s", got, user)
	}
	if got := gitT(t, repo, "branch", "--show-current"); got != "main" {
		t.Errorf("user's branch %s", got)
	}
}

func TestPrepare(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	user := userState(t, repo)
	gitT(t, repo, "tag", "v1", "HEAD~1")

	p, err := Prepare(ctx, repo, "run/from-tag", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if want := gitT(t, repo, "rev-parse", "HEAD~1"); !p.Created || p.Commit != want {
		t.Errorf("from a tag: %+v, want a branch at %s", p, want)
	}
	// An existing branch is used as it is, whatever the base says.
	p, err = Prepare(ctx, repo, "run/from-tag", "main")
	if err != nil || p.Created || p.Commit != gitT(t, repo, "rev-parse", "HEAD~1") {
		t.Errorf("existing branch: %+v, %v", p, err)
	}
	exclude := filepath.Join(repo, ".git", "info", "exclude")
	data, err := os.ReadFile(exclude)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "/.worktrees/\n"); n != 1 {
		t.Errorf("exclude lists .worktrees %d times:\n%s", n, data)
	}
	create(t, repo, "r", "t1", "run/from-tag")
	if got := userState(t, repo); got != user {
		t.Errorf("a worktree shows in the user's checkout\n got %s\nwant %s", got, user)
	}

	// An exclude file without a final newline keeps its last line.
	write(t, exclude, "*.log")
	prepare(t, repo, "run/other")
	if data, _ := os.ReadFile(exclude); string(data) != "*.log\n/.worktrees/\n" {
		t.Errorf("exclude: %q", data)
	}
	// Any spelling that ignores the folder is enough.
	write(t, exclude, ".worktrees\n")
	prepare(t, repo, "run/other")
	if data, _ := os.ReadFile(exclude); string(data) != ".worktrees\n" {
		t.Errorf("exclude: %q", data)
	}
	for range 2 {
		if err := Exclude(ctx, repo, "/.edda/conductor/", "*.tmp", "/.worktrees/"); err != nil {
			t.Fatal(err)
		}
	}
	if data, _ := os.ReadFile(exclude); string(data) != ".worktrees\n/.edda/conductor/\n*.tmp\n" {
		t.Errorf("exclude: %q", data)
	}
}

func TestPrepareRefuses(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitT(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	empty := filepath.Join(t.TempDir(), "empty")
	gitT(t, filepath.Dir(empty), "init", "-q", empty)
	plain := t.TempDir()
	gitT(t, repo, "branch", "taken")
	gitT(t, repo, "branch", "release")
	gitT(t, repo, "branch", "team/run/old")
	gitT(t, repo, "worktree", "add", "-q", filepath.Join(t.TempDir(), "elsewhere"), "taken")

	for _, tc := range []struct {
		name, repo, branch, base string
		is                       error
		want                     string
	}{
		{"no such directory", filepath.Join(plain, "nope"), feature, "", ErrNotRepository, "nope"},
		{"not a repository", plain, feature, "", ErrNotRepository, plain},
		{"bare", bare, feature, "", ErrNotRepository, "is bare"},
		{"subdirectory", filepath.Join(repo, "src"), feature, "", ErrNotRepository, "it is inside " + repo},
		{"no path", "", feature, "", ErrNotRepository, "no path given"},
		{"unknown base", repo, feature, "nope", ErrUnknownRevision, `"nope" is not a commit`},
		{"option as base", repo, feature, "--all", ErrUnknownRevision, "--all"},
		{"no commits yet", empty, feature, "", ErrUnknownRevision, `"HEAD" is not a commit`},
		{"bad branch name", repo, "a..b", "", ErrInvalidName, `"a..b"`},
		{"option as branch", repo, "-f", "", ErrInvalidName, `"-f"`},
		{"the user's branch", repo, "main", "", ErrInUse, "feature branch main is checked out in " + repo},
		{"below a branch", repo, "release/v2", "", ErrInvalidName, "branch release/v2 cannot be made beside the branch release"},
		{"above a branch", repo, "team/run", "", ErrInvalidName, "branch team/run cannot be made beside the branch team/run/old"},
		{"a branch in the user's other worktree", repo, "taken", "", ErrInUse, "elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Prepare(ctx, tc.repo, tc.branch, tc.base)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v naming %q", err, tc.is, tc.want)
			}
		})
	}
	if out := gitT(t, repo, "branch", "--list", feature); out != "" {
		t.Errorf("a refused prepare made the branch: %s", out)
	}
}

// A worktree an attempt left half made, or whose directory went, or whose
// branch outlived it, is made whole by the next Create.
func TestCreateRepairs(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)

	// Killed while checking out: git leaves the worktree locked as
	// "initializing", files missing.
	gitT(t, repo, "worktree", "lock", "--reason", "initializing", a.Path)
	os.Remove(filepath.Join(a.Path, "README"))
	if got := create(t, repo, "r", "a", feature); got != a {
		t.Fatalf("repair: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(a.Path, "README")); err != nil {
		t.Errorf("repaired checkout incomplete: %v", err)
	}
	if out := gitT(t, repo, "worktree", "list", "--porcelain"); strings.Contains(out, "locked") {
		t.Errorf("still locked:\n%s", out)
	}

	// The directory went away behind git's back; its branch has work.
	work := commit(t, a.Path, "work", map[string]string{"a.txt": "a\n"})
	if err := os.RemoveAll(a.Path); err != nil {
		t.Fatal(err)
	}
	create(t, repo, "r", "a", feature)
	if got := gitT(t, a.Path, "rev-parse", "HEAD"); got != work {
		t.Errorf("recreated at %s, want the branch's work %s", got, work)
	}

	// Removed properly, branch kept: the worktree comes back on it.
	if err := Remove(ctx, repo, a.Path); err != nil {
		t.Fatal(err)
	}
	create(t, repo, "r", "a", feature)
	if got := gitT(t, a.Path, "rev-parse", "HEAD"); got != work {
		t.Errorf("after removal at %s, want %s", got, work)
	}

	// A directory that is no worktree (git worktree add died before
	// registering it) is debris.
	debris := TaskPath(repo, "r", "b")
	write(t, filepath.Join(debris, "half"), "x")
	b := create(t, repo, "r", "b", feature)
	if _, err := os.Stat(filepath.Join(b.Path, "half")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("debris kept: %v", err)
	}
	if got := gitT(t, b.Path, "symbolic-ref", "--short", "HEAD"); got != b.Branch {
		t.Errorf("b on %s", got)
	}
}

func TestCreateRefuses(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	gitT(t, a.Path, "checkout", "-q", "--detach")
	gitT(t, repo, "branch", "feature/user-profiles-c")
	gitT(t, repo, "branch", "feature/user-profiles-d/x")
	gitT(t, repo, "worktree", "add", "-q", filepath.Join(t.TempDir(), "c"), "feature/user-profiles-c")

	for _, tc := range []struct {
		name, slug, task, feature string
		is                        error
		want                      string
	}{
		{"worktree on another commit", "r", "a", feature, ErrInUse, "is on a detached HEAD, not feature/user-profiles-a"},
		{"branch checked out elsewhere", "r", "c", feature, ErrInUse, "branch feature/user-profiles-c is checked out in"},
		{"no feature branch", "r", "x", "nope", ErrUnknownRevision, "feature branch nope does not exist"},
		{"slug with a slash", "a/b", "x", feature, ErrInvalidName, `slug "a/b"`},
		{"dot slug", "..", "x", feature, ErrInvalidName, `slug ".."`},
		{"task with a dot", "r", ".integration", feature, ErrInvalidName, `task ".integration"`},
		{"empty task", "r", "", feature, ErrInvalidName, `task ""`},
		{"task branch clashes", "r", "d", feature, ErrInvalidName, "branch feature/user-profiles-d cannot be made beside the branch feature/user-profiles-d/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Create(ctx, repo, tc.slug, tc.task, tc.feature)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v saying %q", err, tc.is, tc.want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	user := userState(t, repo)
	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	tip := commit(t, a.Path, "a", map[string]string{"a.txt": "a\n"})
	write(t, filepath.Join(a.Path, "uncommitted.txt"), "left over\n")
	merge(t, repo, "r", feature, a.Branch)

	for i := range 2 {
		if err := Remove(ctx, repo, a.Path); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if _, err := os.Stat(a.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree still there: %v", err)
	}
	if out := gitT(t, repo, "worktree", "list", "--porcelain"); strings.Contains(out, a.Path+"\n") {
		t.Errorf("git still lists it:\n%s", out)
	}
	if got := gitT(t, repo, "rev-parse", a.Branch); got != tip {
		t.Errorf("branch %s at %s, want kept at %s", a.Branch, got, tip)
	}
	// The integration worktree goes last, relative path and all, and with
	// it the run's folder and .worktrees.
	if err := Remove(ctx, repo, filepath.Join(".worktrees", "r", ".integration")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".worktrees left: %v", err)
	}
	if got := userState(t, repo); got != user {
		t.Errorf("the user's checkout changed\n got %s\nwant %s", got, user)
	}

	for _, bad := range []string{repo, filepath.Join(repo, "src"), filepath.Join(repo, Dir), filepath.Join(repo, Dir, "r"), filepath.Join(repo, Dir, "r", "..", "..", "src", "x"), t.TempDir()} {
		if err := Remove(ctx, repo, bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("remove %s: %v, want refused", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "src", "a.go")); err != nil {
		t.Fatal(err)
	}
}

// Whatever the environment of the worker says about git, the commands
// act on the repository they name and record the run's identity; the
// repository's hooks do not run.
func TestHostSetupDoesNotLeakIn(t *testing.T) {
	repo := newRepo(t)
	other := newRepo(t)
	for _, hook := range []string{"post-checkout", "pre-merge-commit", "commit-msg", "post-merge"} {
		path := filepath.Join(repo, ".git", "hooks", hook)
		write(t, path, "#!/bin/sh\necho hook ran >> \"$(git rev-parse --git-common-dir)/hook-ran\"\nexit 1\n")
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	t.Setenv("GIT_AUTHOR_NAME", "Someone Else")
	t.Setenv("GIT_COMMITTER_EMAIL", "else@example.com")

	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_WORK_TREE")
	write(t, filepath.Join(a.Path, "a.txt"), "a\n")
	gitT(t, a.Path, "add", "a.txt")
	gitT(t, a.Path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "a")
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	res := merge(t, repo, "r", feature, a.Branch)
	os.Unsetenv("GIT_DIR")

	if got := gitT(t, repo, "log", "-1", "--format=%an <%ae> / %cn <%ce>", res.Commit); got != "karvi-edda <karvi-edda@localhost> / karvi-edda <karvi-edda@localhost>" {
		t.Errorf("identity: %s", got)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "hook-ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a hook ran: %v", err)
	}
	if out := gitT(t, other, "branch", "--list"); out != "* main" {
		t.Errorf("the other repository got branches: %s", out)
	}
}
