package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
)

// Exit codes, as edda's: 0 for every plan outcome, 1 for an error (edda's
// anyhow main), 2 for a command-line usage error (clap).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const version = "eddasim 0.3.0 (edda conductor simulator)"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command-line error; it exits 2 like clap's.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == agentChildArg {
		return runAgentChild(args[1:])
	}
	err := dispatch(args, stdout)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %s\n\nUsage: eddasim conduct <run|status|abort|retry|skip> ...\n", ue.msg)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return exitError
	}
}

func dispatch(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("a subcommand is required")
	}
	switch args[0] {
	case "--version", "-V", "version":
		fmt.Fprintln(stdout, version)
		return nil
	case "conduct":
	default:
		return usagef("unrecognized subcommand '%s'", args[0])
	}
	if len(args) < 2 {
		return usagef("'conduct' requires a subcommand")
	}
	sub, rest := args[1], args[2:]
	switch sub {
	case "run":
		return cmdRun(rest, stdout)
	case "status":
		return cmdStatus(rest, stdout)
	case "abort":
		return cmdAbort(rest, stdout)
	case "retry":
		return cmdRetry(rest, stdout)
	case "skip":
		return cmdSkip(rest, stdout)
	}
	return usagef("unrecognized subcommand '%s'", sub)
}

// cliArgs is a parsed command line: flags may appear anywhere, as with clap.
type cliArgs struct {
	positional []string
	values     map[string]string
	bools      map[string]bool
}

// parseArgs accepts --flag, --flag value, --flag=value and the given short aliases.
func parseArgs(args []string, boolFlags, valueFlags []string, short map[string]string) (*cliArgs, error) {
	isBool := map[string]bool{}
	for _, f := range boolFlags {
		isBool[f] = true
	}
	isValue := map[string]bool{}
	for _, f := range valueFlags {
		isValue[f] = true
	}
	out := &cliArgs{values: map[string]string{}, bools: map[string]bool{}}
	onlyPositional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if onlyPositional || a == "-" || !strings.HasPrefix(a, "-") {
			out.positional = append(out.positional, a)
			continue
		}
		if a == "--" {
			onlyPositional = true
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") {
			long, ok := short[name]
			if !ok {
				return nil, usagef("unexpected argument '%s' found", a)
			}
			name = long
		}
		switch {
		case isBool[name]:
			if hasVal {
				return nil, usagef("unexpected value '%s' for '--%s' found; no more were expected", val, name)
			}
			out.bools[name] = true
		case isValue[name]:
			if !hasVal {
				if i+1 >= len(args) {
					return nil, usagef("a value is required for '--%s <%s>' but none was supplied", name, strings.ToUpper(name))
				}
				i++
				val = args[i]
			}
			out.values[name] = val
		default:
			return nil, usagef("unexpected argument '%s' found", a)
		}
	}
	return out, nil
}

func cmdRun(args []string, stdout io.Writer) error {
	ca, err := parseArgs(args, []string{"json", "quiet", "dry-run", "tmux"}, []string{"cwd", "agent"}, map[string]string{"q": "quiet"})
	if err != nil {
		return err
	}
	if len(ca.positional) != 1 {
		return usagef("conduct run takes exactly one <PLAN_FILE>, got %d arguments", len(ca.positional))
	}
	planFile := ca.positional[0]
	jsonOut := ca.bools["json"]

	plan, err := loadPlan(planFile)
	if err != nil {
		return err
	}
	cwd, err := resolveRunCwd(plan, planFile, ca.values["cwd"])
	if err != nil {
		return err
	}
	sc, err := resolveScenario(plan, envScenario())
	if err != nil {
		return fmt.Errorf("eddasim scenario: %w", err)
	}

	st, err := loadState(cwd, plan.Name)
	if err != nil {
		return err
	}
	if st == nil {
		if !jsonOut {
			fmt.Fprintf(stdout, "Starting plan %q (%d phases)\n", plan.Name, len(plan.Phases))
		}
		st = newPlanState(plan, planFile)
	} else if !jsonOut {
		fmt.Fprintf(stdout, "Resuming plan %q\n", plan.Name)
	}

	order, err := topoSort(plan)
	if err != nil {
		return err
	}
	if ca.bools["dry-run"] {
		printDryRun(stdout, plan, order, sc)
		return nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var eventsOut io.Writer
	if jsonOut {
		eventsOut = stdout
	}
	r := &runner{
		plan:   plan,
		state:  st,
		sc:     sc,
		order:  order,
		cwd:    cwd,
		log:    newEventLog(cwd, plan.Name, eventsOut),
		engine: &checkEngine{cwd: cwd},
		ctx:    ctx,
		out:    stdout,
	}
	return r.run()
}

// resolveRunCwd: --cwd, else plan.cwd relative to the plan file, else the
// plan file's directory; relative results are taken from the current directory.
func resolveRunCwd(plan *Plan, planFile, override string) (string, error) {
	cwd := override
	if cwd == "" {
		cwd = filepath.Dir(planFile)
		if plan.Cwd != "" {
			cwd = filepath.Join(cwd, plan.Cwd)
		}
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", fmt.Errorf("resolving working directory %q: %w", cwd, err)
	}
	return abs, nil
}

func printDryRun(w io.Writer, plan *Plan, order []string, sc *scenario) {
	fmt.Fprintf(w, "\n[dry-run] Plan: %s\n", plan.Name)
	fmt.Fprintf(w, "  Phases: %d\n", len(plan.Phases))
	if plan.BudgetUSD != nil {
		fmt.Fprintf(w, "  Budget: $%.2f\n", *plan.BudgetUSD)
	} else {
		fmt.Fprintln(w, "  Budget: unlimited")
	}
	fmt.Fprintf(w, "  Max attempts: %d\n", plan.MaxAttempts)
	fmt.Fprintf(w, "  On fail: %s\n", plan.OnFail)
	fmt.Fprintln(w, "\n  Phase order:")
	for i, id := range order {
		ph := plan.phase(id)
		checks := ""
		if len(ph.Check) > 0 {
			checks = fmt.Sprintf(" (%d checks)", len(ph.Check))
		}
		fmt.Fprintf(w, "  %d. %s%s  [sim %s]\n", i+1, id, checks, describeSpec(sc.phases[id]))
	}
}

func describeSpec(s simSpec) string {
	var parts []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	count := func(n int) string {
		if n == always {
			return "always"
		}
		return fmt.Sprint(n)
	}
	add(s.Skip, "skip")
	add(s.DieAt > 0, "die=%d", s.DieAt)
	add(s.HangForever, "hang=forever")
	add(s.Hang && !s.HangForever, "hang")
	add(s.Timeout, "timeout")
	add(s.Budget, "budget")
	add(s.MaxTurns, "maxturns")
	add(s.CrashN != 0, "crash=%s", count(s.CrashN))
	add(s.FailN != 0, "fail=%s", count(s.FailN))
	add(len(parts) == 0, "pass")
	parts = append(parts, "delay="+s.Delay.String())
	if s.Cost == nil {
		parts = append(parts, "cost=null")
	} else {
		parts = append(parts, "cost="+rustFloat(*s.Cost))
	}
	parts = append(parts, "checks="+s.Checks)
	add(s.Events > 0, "events=%d", s.Events)
	add(s.Tools > 0, "tools=%d", s.Tools)
	add(s.Child, "child")
	add(s.Orphan, "orphan")
	return strings.Join(parts, " ")
}
