package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"karvi-edda-temporal/mapping"
)

// The simulator stands in for edda in every end-to-end test, so it writes
// every event type the runtime knows: a type added to mapping.EventTypes
// fails here until some scenario of the simulator records it, or no test
// would ever see the runtime take it from a conductor.
func TestSimulatorWritesEveryKnownEventType(t *testing.T) {
	written := recordedEventTypes(t)
	wrote := func(typ string) bool { return slices.Contains(written, typ) }
	if missing := mapping.MissingEventTypes(wrote); len(missing) > 0 {
		t.Errorf("the simulator never records %v (it records %v)", missing, written)
	}
	// The check bites: a type no scenario writes is missing.
	if got := mapping.MissingEventTypes(wrote, append(mapping.EventTypes, "phase_paused")...); !slices.Equal(got, []string{"phase_paused"}) {
		t.Errorf("a type the simulator does not write reads as missing %v", got)
	}
}

// recordedEventTypes are the types the package's code passes to
// eventLog.record, read from its source.
func recordedEventTypes(t *testing.T) []string {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var types []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || len(c.Args) == 0 {
				return true
			}
			if sel, ok := c.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "record" {
				return true
			}
			if lit, ok := c.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				typ, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(types, typ) {
					types = append(types, typ)
				}
			}
			return true
		})
	}
	return types
}
