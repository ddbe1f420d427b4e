package worktree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain shuts the host's git configuration out: what a developer's
// ~/.gitconfig or /etc/gitconfig says (merge.ff, a default branch, hooks,
// an identity) must not change a result.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "worktree-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": os.DevNull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": home,
		"XDG_CONFIG_HOME": home, "GIT_TERMINAL_PROMPT": "0",
	} {
		os.Setenv(k, v)
	}
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// gitT runs git for a test's own setup (commits in the user's checkout or
// in a worktree, as a person or an agent would) and returns its output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Tester", "-c", "user.email=tester@example.com"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// commit writes files in dir and commits them there.
func commit(t *testing.T, dir, msg string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		write(t, filepath.Join(dir, name), content)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// newRepo is a user's repository: two commits on main, then a checkout a
// person is in the middle of: a change staged, another not, a file not
// tracked. The run must leave all of it as it is.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	gitT(t, filepath.Dir(dir), "init", "-q", "-b", "main", dir)
	commit(t, dir, "init", map[string]string{"README": "hello\n", "src/a.go": "package a\n", "src/b.go": "package b\n"})
	commit(t, dir, "second", map[string]string{"docs/guide.md": "# guide\n"})
	write(t, filepath.Join(dir, "src/a.go"), "package a // staged\n")
	gitT(t, dir, "add", "src/a.go")
	write(t, filepath.Join(dir, "README"), "hello, unsaved\n")
	write(t, filepath.Join(dir, "notes.txt"), "scratch\n")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// userState captures the user's checkout: its branch and commit, its
// index file byte for byte, every file outside .git and .worktrees, and
// what `git status` says (run without refreshing the index).
func userState(t *testing.T, repo string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "HEAD %s %s\n", gitT(t, repo, "symbolic-ref", "HEAD"), gitT(t, repo, "rev-parse", "HEAD"))
	index, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "index %x\n", sha256.Sum256(index))
	err = filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		if d.IsDir() && (rel == ".git" || rel == Dir) {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "file %s %x\n", rel, sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(gitT(t, repo, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all"))
	return b.String()
}

func prepare(t *testing.T, repo, feature string) Prepared {
	t.Helper()
	p, err := Prepare(context.Background(), repo, feature, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func create(t *testing.T, repo, slug, task, feature string) Worktree {
	t.Helper()
	wt, err := Create(context.Background(), repo, slug, task, feature)
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

func merge(t *testing.T, repo, slug, feature, branch string) MergeResult {
	t.Helper()
	res, err := Merge(context.Background(), repo, slug, feature, branch, "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}
