package layers_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layers of docs/architecture.md, checked on the import graph `go
// list` gives: an import only ever points down.

const module = "karvi-edda-temporal"

// pure are the pure rules: no I/O, no Temporal, no adapter.
var pure = []string{"mapping", "mapping/redact", "canonical", "jobview", "runplan", "runstatus",
	"runview", "slots", "intent", "intake", "limits", "stalls", "costs", "dag", "traces"}

// programs are the binaries, the programs under cmd/, the test kit and
// the docs' own test: they may import anything.
var programs = []string{"worker", "starter", "cmd", "testkit", "e2e", "faults", "bench", "soak", "tools", "docs"}

type layer int

const (
	layerPure layer = iota
	layerAdapter
	layerAPI
	layerFlowkit
	layerWorkflowWing
	layerRegistry // package workflows: registers every wing
	layerActivities
	layerActivityWing
	layerProgram
	layerUnknown
)

// classify names the layer of a package of the module (its path without
// the module) and, for a wing, its feature: taskflow and taskact are the
// wings of feature "task".
func classify(rel string) (layer, string) {
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case rel == "": // this test
		return layerProgram, ""
	case slices.Contains(pure, rel):
		return layerPure, ""
	case top == "internal":
		return layerAdapter, ""
	case top == "api":
		return layerAPI, strings.TrimPrefix(rel, "api/")
	case rel == "workflows":
		return layerRegistry, ""
	case rel == "workflows/flowkit":
		return layerFlowkit, ""
	case top == "workflows":
		w := strings.TrimPrefix(rel, "workflows/")
		w, _, _ = strings.Cut(w, "/")
		return layerWorkflowWing, strings.TrimSuffix(w, "flow")
	case rel == "activities":
		return layerActivities, ""
	case top == "activities":
		w := strings.TrimPrefix(rel, "activities/")
		w, _, _ = strings.Cut(w, "/")
		return layerActivityWing, strings.TrimSuffix(w, "act")
	case slices.Contains(programs, top):
		return layerProgram, ""
	}
	return layerUnknown, ""
}

// pkg is what go list says of a package: its direct imports and all it
// depends on.
type pkg struct {
	imports, deps []string
}

// rel is a package path inside the module, ok false for one outside it.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// refusal says why from may not depend on to, "" when it may.
func refusal(from, to string) string {
	fl, fw := classify(from)
	tr, inModule := rel(to)
	if !inModule {
		if fl == layerPure && strings.HasPrefix(to, "go.temporal.io/") {
			return "pure rules build without the Temporal SDK"
		}
		return ""
	}
	tl, tw := classify(tr)
	switch fl {
	case layerPure:
		if tl != layerPure {
			return "pure rules import only pure rules (no adapter, workflow, activity or client API package)"
		}
	case layerAdapter:
		if tl != layerPure && tl != layerAdapter {
			return "adapters import only pure rules and adapters (no workflow, activity or client API package)"
		}
	case layerAPI:
		if tl == layerWorkflowWing || tl == layerFlowkit || tl == layerRegistry || tl == layerActivities || tl == layerActivityWing || tl == layerProgram {
			return "client API packages import no workflow or activity package"
		}
	case layerFlowkit:
		if tl == layerWorkflowWing || tl == layerRegistry || tl == layerActivityWing || tl == layerProgram {
			return "the workflow kit imports no wing"
		}
	case layerWorkflowWing:
		switch {
		case tl == layerWorkflowWing && tw != fw:
			return "a workflow wing never imports another workflow wing"
		case tl == layerActivityWing && tw != fw:
			return "a workflow wing imports only its own activity wing (another wing's activities are called by the names of that wing's client API)"
		case tl == layerRegistry || tl == layerProgram:
			return "a workflow wing imports no program"
		}
	case layerActivities:
		if tl == layerWorkflowWing || tl == layerFlowkit || tl == layerRegistry || tl == layerActivityWing || tl == layerProgram {
			return "the shared activity package imports no wing"
		}
	case layerActivityWing:
		switch {
		case tl == layerWorkflowWing || tl == layerFlowkit || tl == layerRegistry:
			return "an activity wing never imports workflow code"
		case tl == layerActivityWing && tw != fw:
			return "an activity wing never imports another activity wing (it goes through that wing's client API)"
		case tl == layerProgram:
			return "an activity wing imports no program"
		}
	case layerRegistry:
		if tl == layerProgram {
			return "the workflow registry imports no program"
		}
	}
	return ""
}

// violations lists every broken rule of the graph, each naming the
// package, the offending dependency and, when it comes in through
// another package, the direct import it comes through.
func violations(pkgs map[string]pkg) []string {
	var out []string
	var paths []string
	for p := range pkgs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		from, ok := rel(p)
		if !ok {
			continue
		}
		if l, _ := classify(from); l == layerUnknown {
			out = append(out, fmt.Sprintf("%s: a package of no layer of docs/architecture.md: name its layer there and in layers_test.go", p))
			continue
		}
		direct := pkgs[p].imports
		// The SDK is many packages: one line per import it comes through.
		sdkVia := map[string]bool{}
		for _, d := range pkgs[p].deps {
			why := refusal(from, d)
			if why == "" {
				continue
			}
			if slices.Contains(direct, d) {
				out = append(out, fmt.Sprintf("%s imports %s: %s", p, d, why))
				continue
			}
			via := "?"
			for _, i := range direct {
				if slices.Contains(pkgs[i].deps, d) || i == d {
					via = i
					break
				}
			}
			if _, inModule := rel(d); !inModule {
				if sdkVia[via] {
					continue
				}
				sdkVia[via] = true
			}
			out = append(out, fmt.Sprintf("%s depends on %s through its import of %s: %s", p, d, via, why))
		}
	}
	return out
}

// goList reads the module's import graph, with the build tags given.
func goList(t *testing.T, tags string) map[string]pkg {
	t.Helper()
	// go test puts its own go first on the PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the packages with: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(gobin, append(args, "./...")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		pkgs[f[0]] = pkg{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// Every import of the module keeps to the layers of docs/architecture.md,
// in the default build and in the real-server tests' build.
func TestImportsKeepToTheLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the module")
	}
	for _, tags := range []string{"", "realserver"} {
		pkgs := goList(t, tags)
		if _, ok := pkgs[module+"/runview"]; !ok {
			t.Fatalf("go list (tags %q) did not list the module's packages", tags)
		}
		for _, v := range violations(pkgs) {
			t.Errorf("tags %q: %s", tags, v)
		}
	}
}

// A broken rule is named with the offending import, and a dependency
// that comes in through another package with the import it comes
// through.
func TestViolationsNameTheOffendingImport(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := map[string]pkg{
		m("runview"):                  {imports: []string{m("api/run")}, deps: []string{m("api/run"), "go.temporal.io/sdk/temporal"}},
		m("api/run"):                  {imports: []string{"go.temporal.io/sdk/temporal"}, deps: []string{"go.temporal.io/sdk/temporal"}},
		m("workflows/taskflow"):       {imports: []string{m("activities/slotact")}, deps: []string{m("activities/slotact")}},
		m("activities/taskact"):       {imports: []string{m("activities/accountact")}, deps: []string{m("activities/accountact")}},
		m("activities/slotact"):       {},
		m("activities/accountact"):    {},
		m("internal/sink"):            {imports: []string{m("api/task")}, deps: []string{m("api/task"), m("workflows/taskflow"), m("activities/slotact")}},
		m("api/task"):                 {imports: []string{m("workflows/taskflow")}, deps: []string{m("workflows/taskflow"), m("activities/slotact")}},
		m("workflows/runflow"):        {imports: []string{m("workflows/taskflow")}, deps: []string{m("workflows/taskflow"), m("activities/slotact")}},
		m("workflows/flowkit"):        {imports: []string{m("activities/taskact")}, deps: []string{m("activities/taskact"), m("activities/accountact")}},
		m("activities/intakeact"):     {imports: []string{m("workflows/intakeflow")}, deps: []string{m("workflows/intakeflow")}},
		m("workflows/intakeflow"):     {},
		m("newthing"):                 {},
		m("worker"):                   {imports: []string{m("workflows/taskflow")}, deps: []string{m("workflows/taskflow"), m("activities/slotact")}},
		m("workflows"):                {imports: []string{m("workflows/taskflow")}, deps: []string{m("workflows/taskflow"), m("activities/slotact")}},
		m("activities/intentact"):     {imports: []string{m("activities"), m("api/run")}, deps: []string{m("activities"), m("api/run"), "go.temporal.io/sdk/temporal"}},
		m("activities"):               {},
		m("workflows/intentflow"):     {imports: []string{m("activities/intentact"), m("workflows/flowkit")}, deps: []string{m("activities/intentact"), m("workflows/flowkit")}},
		"go.temporal.io/sdk/temporal": {},
	}
	got := violations(pkgs)
	want := []string{
		m("activities/intakeact") + " imports " + m("workflows/intakeflow"),
		m("activities/taskact") + " imports " + m("activities/accountact"),
		m("api/task") + " imports " + m("workflows/taskflow"),
		m("api/task") + " depends on " + m("activities/slotact") + " through its import of " + m("workflows/taskflow"),
		m("internal/sink") + " imports " + m("api/task"),
		m("internal/sink") + " depends on " + m("workflows/taskflow") + " through its import of " + m("api/task"),
		m("internal/sink") + " depends on " + m("activities/slotact") + " through its import of " + m("api/task"),
		m("newthing") + ": a package of no layer",
		m("runview") + " imports " + m("api/run"),
		m("runview") + " depends on go.temporal.io/sdk/temporal through its import of " + m("api/run"),
		m("workflows/flowkit") + " imports " + m("activities/taskact"),
		m("workflows/flowkit") + " depends on " + m("activities/accountact") + " through its import of " + m("activities/taskact"),
		m("workflows/runflow") + " imports " + m("workflows/taskflow"),
		m("workflows/runflow") + " depends on " + m("activities/slotact") + " through its import of " + m("workflows/taskflow"),
		m("workflows/taskflow") + " imports " + m("activities/slotact"),
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}
