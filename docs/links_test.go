// Package docs holds no code: its test checks that the links between the
// project's markdown pages lead somewhere.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// link is a markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// Every relative link of every markdown file git knows names a file or
// folder that exists, and its #anchor, in a markdown file, a heading of it.
func TestRelativeLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no markdown file found")
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(data))
		anchors[path] = a
		return a
	}
	for _, rel := range files {
		path := filepath.Join(root, rel)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(data)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no such file %s", rel, n+1, target, file)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", rel, n+1, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
}

// The checker itself: a broken file, a broken anchor and a link inside
// code are told apart.
func TestTheCheckerSeesHeadingsAndCode(t *testing.T) {
	a := headingAnchors("# Title\n\n## 11. Where: it differs\n```\n## not a heading\n```\n## Title\n")
	for _, want := range []string{"title", "11-where-it-differs", "title-1"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block taken for a heading")
	}
	lines := proseLines("see [a](a.md)\n```\n[b](b.md)\n```\nand `[c](c.md)` then [d](d.md)\n")
	var got []string
	for _, l := range lines {
		for _, m := range link.FindAllStringSubmatch(l, -1) {
			got = append(got, m[1])
		}
	}
	if strings.Join(got, " ") != "a.md d.md" {
		t.Errorf("links outside code: %v, want a.md d.md", got)
	}
}

func markdownFiles(t *testing.T, root string) []string {
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err != nil {
		// Not a git checkout (an unpacked archive): every markdown file
		// outside the build's and the runs' own folders.
		return walkMarkdown(t, root)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			files = append(files, f)
		}
	}
	return files
}

func walkMarkdown(t *testing.T, root string) []string {
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// proseLines are the lines of a markdown text with fenced code blocks and
// inline code blanked, so a link shown as code is not checked; the line
// numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	inline := regexp.MustCompile("`[^`]*`")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
			continue
		}
		lines[i] = inline.ReplaceAllString(l, "")
	}
	return lines
}

// headingAnchors are the anchors GitHub gives a text's headings: lower
// case, punctuation dropped, spaces to hyphens, a repeat numbered.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		h = strings.ReplaceAll(h, "`", "")
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
