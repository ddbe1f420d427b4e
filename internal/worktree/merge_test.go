package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Two tasks change the same line. The first merges; the second is a
// conflict that names the file and leaves the feature branch, and the
// integration worktree, as they were; asked again it answers the same.
// A person rebases the task's branch and the merge then succeeds.
func TestConflict(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	user := userState(t, repo)
	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	b := create(t, repo, "r", "b", feature)
	commit(t, a.Path, "a", map[string]string{"README": "hello from a\n", "src/a.go": "package a // a\n"})
	commit(t, b.Path, "b", map[string]string{"README": "hello from b\n", "src/b.go": "package b // b\n", "src/a.go": "package a // b\n"})

	ma := merge(t, repo, "r", feature, a.Branch)
	for i := range 2 {
		mb, err := Merge(ctx, repo, "r", feature, b.Branch, "Merge b")
		if err != nil {
			t.Fatalf("merge b (%d): %v", i, err)
		}
		if mb.Merged || mb.Commit != "" || !slices.Equal(mb.ConflictFiles, []string{"README", "src/a.go"}) {
			t.Fatalf("merge b (%d): %+v, want a conflict on README and src/a.go", i, mb)
		}
		if !slices.Equal(mb.Touched, []string{"README", "src/a.go", "src/b.go"}) {
			t.Errorf("touched: %v", mb.Touched)
		}
		if got := gitT(t, repo, "rev-parse", feature); got != ma.Commit {
			t.Fatalf("feature branch moved to %s after a conflict, want %s", got, ma.Commit)
		}
		integration := IntegrationPath(repo, "r")
		if st := gitT(t, integration, "status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Fatalf("integration worktree left dirty:\n%s", st)
		}
		gitDir := gitT(t, integration, "rev-parse", "--path-format=absolute", "--git-dir")
		if _, err := os.Stat(filepath.Join(gitDir, "MERGE_HEAD")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("merge left in progress: %v", err)
		}
	}
	if got := userState(t, repo); got != user {
		t.Errorf("the user's checkout changed\n got %s\nwant %s", got, user)
	}

	// The person's fix: rebase b onto the feature branch, taking b's side.
	gitT(t, b.Path, "-c", "core.editor=true", "rebase", "-q", "-X", "theirs", feature)
	mb := merge(t, repo, "r", feature, b.Branch)
	if !mb.Merged || len(mb.ConflictFiles) > 0 {
		t.Fatalf("merge after the rebase: %+v", mb)
	}
	if got := gitT(t, repo, "show", feature+":README"); got != "hello from b" {
		t.Errorf("README on the feature branch: %q", got)
	}
}

// A task that committed nothing merges as nothing: no merge commit, the
// feature branch stays where it is.
func TestMergeNothingNew(t *testing.T) {
	repo := newRepo(t)
	p := prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	write(t, filepath.Join(a.Path, "uncommitted.txt"), "not part of the branch\n")
	res := merge(t, repo, "r", feature, a.Branch)
	if !res.Merged || res.Commit != p.Commit || len(res.Touched) != 0 {
		t.Errorf("empty branch: %+v, want merged at the tip %s touching nothing", res, p.Commit)
	}
	if got := gitT(t, repo, "rev-parse", feature); got != p.Commit {
		t.Errorf("feature moved to %s", got)
	}
}

// A merge killed half way leaves the integration worktree mid-merge with
// git's index lock in place; the next Merge clears it and goes on.
func TestMergeAfterAKilledMerge(t *testing.T) {
	repo := newRepo(t)
	prepare(t, repo, feature)
	a := create(t, repo, "r", "a", feature)
	b := create(t, repo, "r", "b", feature)
	commit(t, a.Path, "a", map[string]string{"README": "a\n"})
	commit(t, b.Path, "b", map[string]string{"README": "b\n"})
	tip := merge(t, repo, "r", feature, a.Branch).Commit

	integration := IntegrationPath(repo, "r")
	gitDir := gitT(t, integration, "rev-parse", "--path-format=absolute", "--git-dir")
	cmdErr := func() error {
		_, err := git(context.Background(), integration, "merge", "--no-ff", "--no-edit", b.Branch)
		return err
	}()
	if cmdErr == nil {
		t.Fatal("the setup's merge did not conflict")
	}
	write(t, filepath.Join(integration, "stray.txt"), "x\n")
	write(t, filepath.Join(gitDir, "index.lock"), "")

	c := create(t, repo, "r", "c", feature)
	commit(t, c.Path, "c", map[string]string{"c.txt": "c\n"})
	res := merge(t, repo, "r", feature, c.Branch)
	if !res.Merged || gitT(t, repo, "rev-parse", res.Commit+"^1") != tip {
		t.Fatalf("merge after the leftovers: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(integration, "stray.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray file kept: %v", err)
	}
}

// Merges of one run wait for each other: started together, both land,
// one after the other, each on the other's result.
func TestMergesOfARunAreSerialised(t *testing.T) {
	repo := newRepo(t)
	prepare(t, repo, feature)
	var branches []string
	for _, task := range []string{"a", "b", "c"} {
		w := create(t, repo, "r", task, feature)
		commit(t, w.Path, task, map[string]string{task + ".txt": task + "\n"})
		branches = append(branches, w.Branch)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(branches))
	for i, br := range branches {
		wg.Go(func() { _, errs[i] = Merge(context.Background(), repo, "r", feature, br, "") })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	merges := strings.Fields(gitT(t, repo, "rev-list", "--first-parent", "--merges", feature))
	if len(merges) != 3 {
		t.Fatalf("%d merge commits on the feature branch, want 3", len(merges))
	}
	for _, task := range []string{"a", "b", "c"} {
		if _, err := git(context.Background(), repo, "cat-file", "-e", feature+":"+task+".txt"); err != nil {
			t.Errorf("%s.txt missing from the feature branch: %v", task, err)
		}
	}
}

func TestMergeRefuses(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	prepare(t, repo, feature)
	gitT(t, repo, "branch", "unrelated", gitT(t, repo, "commit-tree", "-m", "root", gitT(t, repo, "write-tree")))
	for _, tc := range []struct {
		name, slug, feature, branch string
		is                          error
		want                        string
	}{
		{"no such branch", "r", feature, "nope", ErrUnknownRevision, "branch nope does not exist"},
		{"no feature branch", "r", "nope", "main", ErrUnknownRevision, "feature branch nope does not exist"},
		{"into itself", "r", feature, feature, ErrInvalidName, "into itself"},
		{"bad slug", "../x", feature, "main", ErrInvalidName, `slug "../x"`},
		{"no shared history", "r", feature, "unrelated", ErrUnknownRevision, "shares no history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Merge(ctx, repo, tc.slug, tc.feature, tc.branch, "")
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v saying %q", err, tc.is, tc.want)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		touched map[string][]string
		want    []Overlap
	}{
		{"nothing", nil, nil},
		{"disjoint", map[string][]string{"a": {"x"}, "b": {"y"}}, nil},
		{"one task twice", map[string][]string{"a": {"x", "x"}}, nil},
		{"shared", map[string][]string{
			"c": {"src/types.ts", "README"},
			"a": {"src/types.ts", "src/a.ts"},
			"b": {"README", "src/types.ts", "src/types.ts"},
			"d": nil,
		}, []Overlap{
			{Path: "README", Tasks: []string{"b", "c"}},
			{Path: "src/types.ts", Tasks: []string{"a", "b", "c"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // map order varies from one run to the next
				got := Overlaps(tc.touched)
				if !slices.EqualFunc(got, tc.want, func(a, b Overlap) bool { return a.Path == b.Path && slices.Equal(a.Tasks, b.Tasks) }) {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}
