package workflows

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Every workflow.GetVersion call of every wing names its change id by a
// constant of its package's versions.go, and every change id listed there
// is still asked for: one file per wing holds the ids a history may carry.
func TestGetVersionUsesListedChangeIDs(t *testing.T) {
	problems, err := versioningProblems(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The check itself sees a literal id, an id from another file, and an id
// listed but never asked for.
func TestVersioningCheckSeesEveryKindOfProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("versions.go", "package w\n\nconst (\n\tversionA = \"a\"\n\tversionUnused = \"unused\"\n)\n")
	write("w.go", `package w

import "go.temporal.io/sdk/workflow"

const versionElsewhere = "elsewhere"

func f(ctx workflow.Context) {
	workflow.GetVersion(ctx, versionA, workflow.DefaultVersion, 1)
	workflow.GetVersion(ctx, "literal", workflow.DefaultVersion, 1)
	workflow.GetVersion(ctx, versionElsewhere, workflow.DefaultVersion, 1)
}
`)
	problems, err := versioningProblems(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{`w.go:9: GetVersion's change id "literal"`, "w.go:10: GetVersion's change id versionElsewhere",
		"versionUnused (\"unused\") is listed but no GetVersion asks for it"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	if len(problems) != 3 {
		t.Errorf("want 3 problems, got %d:\n%s", len(problems), got)
	}
}

// versioningProblems checks every package under root (tests left out).
func versioningProblems(root string) ([]string, error) {
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	for dir := range dirs {
		p, err := packageVersioningProblems(dir)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	sort.Strings(problems)
	return problems, nil
}

func packageVersioningProblems(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	listed := map[string]string{} // constant -> change id, from versions.go
	asked := map[string]bool{}
	type call struct {
		pos token.Position
		arg ast.Expr
	}
	var calls []call
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		if name == "versions.go" {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								id, _ := strconv.Unquote(lit.Value)
								listed[n.Name] = id
							}
						}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || len(c.Args) < 2 {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "GetVersion" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "workflow" {
				return true
			}
			calls = append(calls, call{pos: fset.Position(c.Pos()), arg: c.Args[1]})
			return true
		})
	}
	var problems []string
	for _, c := range calls {
		where := fmt.Sprintf("%s:%d", filepath.ToSlash(c.pos.Filename), c.pos.Line)
		switch a := c.arg.(type) {
		case *ast.Ident:
			if _, ok := listed[a.Name]; ok {
				asked[a.Name] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: GetVersion's change id %s is not a constant of %s/versions.go: list it there, with what it guards and since when", where, a.Name, dir))
		case *ast.BasicLit:
			problems = append(problems, fmt.Sprintf("%s: GetVersion's change id %s is a literal: make it a constant of %s/versions.go", where, a.Value, dir))
		default:
			problems = append(problems, fmt.Sprintf("%s: GetVersion's change id is an expression: make it a constant of %s/versions.go", where, dir))
		}
	}
	ids := map[string]string{}
	for name, id := range listed {
		if !asked[name] {
			problems = append(problems, fmt.Sprintf("%s/versions.go: %s (%q) is listed but no GetVersion asks for it: a change id stays while histories that recorded it may replay, and goes with the code that asks for it", dir, name, id))
		}
		if other, ok := ids[id]; ok {
			problems = append(problems, fmt.Sprintf("%s/versions.go: %s and %s are the same change id %q", dir, name, other, id))
		}
		ids[id] = name
	}
	return problems, nil
}
