package taskact

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The conductor's command lines are built in one place, so a first start
// and a resume after a pause cannot drift apart: outside conductorArgs no
// code of the package spells the conductor's "conduct" subcommand.
func TestConductorCommandLineIsBuiltInOnePlace(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(".", e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value == `"conduct"` {
					found = append(found, fmt.Sprintf("%s in %s", fset.Position(lit.Pos()), fn.Name.Name))
				}
				return true
			})
		}
	}
	if len(found) != 1 || !strings.HasSuffix(found[0], " in conductorArgs") {
		t.Errorf("the conductor's command line is built in %d places, want one (conductorArgs):\n%s", len(found), strings.Join(found, "\n"))
	}
}

// The command lines as edda takes them.
func TestConductorCommandLines(t *testing.T) {
	plan := PlanInfo{PlanPath: "/w/runs/T5/p/plan.yaml", Cwd: "/w/tasks/T5"}
	plan.Summary.Name = "karvi-t5-020d01-r1-1f0c9a2b"
	for _, c := range []struct {
		got, want []string
	}{
		{conductorRun("/bin/edda", plan), []string{"/bin/edda", "conduct", "run", "/w/runs/T5/p/plan.yaml", "--cwd", "/w/tasks/T5", "--json"}},
		{conductorArgs("/bin/edda", "abort", plan.Summary.Name), []string{"/bin/edda", "conduct", "abort", "karvi-t5-020d01-r1-1f0c9a2b"}},
		{conductorArgs("/bin/edda", "retry", "test", "--plan", plan.Summary.Name), []string{"/bin/edda", "conduct", "retry", "test", "--plan", "karvi-t5-020d01-r1-1f0c9a2b"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
