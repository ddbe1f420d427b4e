package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// repoRoot is where status/abort/retry/skip look for .edda/conductor/: the
// nearest ancestor of the current directory holding .edda, else the
// current directory itself.
func repoRoot() (string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading current directory: %w", err)
	}
	for dir := cwd; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, ".edda")); err == nil && fi.IsDir() {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return cwd, nil
		}
	}
}

// listPlans names the plans under root that have a state.json, sorted.
func listPlans(root string) ([]string, error) {
	dir := filepath.Join(root, ".edda", "conductor")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(statePath(root, e.Name())); err == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func resolvePlanName(root, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	names, err := listPlans(root)
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("No plans found. Specify --plan <name>.")
	case 1:
		return names[0], nil
	}
	return "", fmt.Errorf("Multiple plans found: %s. Use --plan to specify.", strings.Join(names, ", "))
}

// debugName renders a status like Rust's Debug of the enum (Running, Stale...).
func debugName(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// mutateState applies fn to a plan's state under the state lock and saves it.
func mutateState(root, plan string, fn func(*PlanState) error) error {
	return withStateLock(root, plan, func() error {
		st, err := loadState(root, plan)
		if err != nil {
			return err
		}
		if st == nil {
			return fmt.Errorf("no state for plan %q", plan)
		}
		if err := fn(st); err != nil {
			return err
		}
		return saveStateFile(root, st)
	})
}

// planArg takes the plan from --plan or a positional argument (--plan wins).
func planArg(ca *cliArgs, maxPositional int) (string, error) {
	if len(ca.positional) > maxPositional {
		return "", usagef("unexpected argument '%s' found", ca.positional[maxPositional])
	}
	if p := ca.values["plan"]; p != "" {
		return p, nil
	}
	if len(ca.positional) == maxPositional && maxPositional > 0 {
		return ca.positional[maxPositional-1], nil
	}
	return "", nil
}

// cmdAbort only rewrites state.json: it signals no process and writes no event.
func cmdAbort(args []string, stdout io.Writer) error {
	ca, err := parseArgs(args, nil, []string{"plan"}, nil)
	if err != nil {
		return err
	}
	explicit, err := planArg(ca, 1)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	name, err := resolvePlanName(root, explicit)
	if err != nil {
		return err
	}
	err = mutateState(root, name, func(st *PlanState) error {
		if st.PlanStatus == planCompleted || st.PlanStatus == planAborted {
			return fmt.Errorf("Plan %q is already %s.", name, debugName(st.PlanStatus))
		}
		st.PlanStatus = planAborted
		st.AbortedAt = strPtr(nowRFC3339())
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Plan %q aborted.\n", name)
	return nil
}

func phaseArg(ca *cliArgs, verb string) (string, error) {
	if len(ca.positional) == 0 {
		return "", usagef("conduct %s requires <PHASE_ID>", verb)
	}
	if len(ca.positional) > 1 {
		return "", usagef("unexpected argument '%s' found", ca.positional[1])
	}
	return ca.positional[0], nil
}

func cmdRetry(args []string, stdout io.Writer) error {
	ca, err := parseArgs(args, nil, []string{"plan"}, nil)
	if err != nil {
		return err
	}
	phaseID, err := phaseArg(ca, "retry")
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	name, err := resolvePlanName(root, ca.values["plan"])
	if err != nil {
		return err
	}
	err = mutateState(root, name, func(st *PlanState) error {
		ps := st.phase(phaseID)
		if ps == nil {
			return fmt.Errorf("phase not found: %q", phaseID)
		}
		if ps.Status != phaseFailed && ps.Status != phaseStale {
			return fmt.Errorf("Phase %q is %s, not Failed or Stale. Cannot retry.", phaseID, debugName(ps.Status))
		}
		if _, err := st.transition(phaseID, ps.Status, phasePending, nil); err != nil {
			return err
		}
		if st.PlanStatus == planBlocked {
			st.PlanStatus = planRunning
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Phase %q reset to Pending. Run `eddasim conduct run` to resume.\n", phaseID)
	return nil
}

func cmdSkip(args []string, stdout io.Writer) error {
	ca, err := parseArgs(args, nil, []string{"plan", "reason"}, nil)
	if err != nil {
		return err
	}
	phaseID, err := phaseArg(ca, "skip")
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	name, err := resolvePlanName(root, ca.values["plan"])
	if err != nil {
		return err
	}
	reason := ca.values["reason"]
	if reason == "" {
		reason = "manually skipped"
	}
	err = mutateState(root, name, func(st *PlanState) error {
		ps := st.phase(phaseID)
		if ps == nil {
			return fmt.Errorf("phase not found: %q", phaseID)
		}
		if ps.Status != phaseFailed && ps.Status != phaseStale && ps.Status != phasePending {
			return fmt.Errorf("Phase %q is %s. Can only skip Failed, Stale, or Pending phases.", phaseID, debugName(ps.Status))
		}
		ps.Status = phaseSkipped
		ps.SkipReason = &reason
		if st.PlanStatus == planBlocked {
			st.PlanStatus = planRunning
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Phase %q skipped.\n", phaseID)
	return nil
}

func cmdStatus(args []string, stdout io.Writer) error {
	ca, err := parseArgs(args, []string{"json"}, nil, nil)
	if err != nil {
		return err
	}
	if len(ca.positional) > 1 {
		return usagef("unexpected argument '%s' found", ca.positional[1])
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	asJSON := ca.bools["json"]
	if len(ca.positional) == 1 {
		name := ca.positional[0]
		st, err := loadState(root, name)
		if err != nil {
			return err
		}
		switch {
		case asJSON && st == nil:
			fmt.Fprintln(stdout, "null")
		case asJSON:
			return printJSON(stdout, st)
		case st == nil:
			fmt.Fprintf(stdout, "Plan %q: no state file found\n", name)
		default:
			printStatus(stdout, st)
		}
		return nil
	}
	names, err := listPlans(root)
	if err != nil {
		return err
	}
	states := []*PlanState{}
	for _, n := range names {
		st, err := loadState(root, n)
		if err != nil {
			return err
		}
		states = append(states, st)
	}
	if asJSON {
		return printJSON(stdout, states)
	}
	if len(states) == 0 {
		fmt.Fprintln(stdout, "No plans found.")
	}
	for _, st := range states {
		printStatus(stdout, st)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func printStatus(w io.Writer, st *PlanState) {
	fmt.Fprintf(w, "\nPlan: %s (%s)\n", st.PlanName, debugName(st.PlanStatus))
	if st.PlanFile != "" {
		fmt.Fprintf(w, "  File: %s\n", st.PlanFile)
	}
	fmt.Fprintf(w, "  Cost: $%.2f\n\n", st.TotalCostUSD)
	icons := map[string]string{
		phasePassed: "✓", phaseFailed: "✗", phaseRunning: "▶", phaseChecking: "▶",
		phaseSkipped: "⊘", phaseStale: "⏰", phasePending: "○",
	}
	for _, ps := range st.Phases {
		detail := ""
		switch ps.Status {
		case phasePassed:
			detail = fmt.Sprintf("(attempt %d)", ps.Attempts)
		case phaseFailed:
			msg := "unknown"
			if ps.Error != nil {
				msg = ps.Error.Message
			}
			detail = fmt.Sprintf("(attempt %d, %s)", ps.Attempts, msg)
		case phaseSkipped:
			if ps.SkipReason != nil {
				detail = "(" + *ps.SkipReason + ")"
			}
		}
		fmt.Fprintf(w, "  %s %-24s %s %s\n", icons[ps.Status], ps.ID, debugName(ps.Status), detail)
	}
	fmt.Fprintln(w)
}
