package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dieExitCode is the exit status of a simulated conductor crash (`die`).
const dieExitCode = 3

// runner is one `conduct run` process: edda's sequential runner loop over
// a simulated agent.
type runner struct {
	plan   *Plan
	state  *PlanState
	sc     *scenario
	order  []string
	cwd    string
	log    *eventLog
	engine *checkEngine
	ctx    context.Context // cancelled by SIGINT, like edda's Ctrl+C handler
	out    io.Writer       // human progress lines (edda prints them to stdout even with --json)
	spent  float64         // this process's spending, like edda's BudgetTracker
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *runner) notify(format string, args ...any) {
	r.say("[conductor] "+format, args...)
}

// effectiveStatus is the plan_status written to disk. In strict mode it is
// edda's in-memory value, which reads "pending" during most of a run and is
// never saved as "blocked". Otherwise it is what a reader expects: running
// while the plan is under way, blocked once a phase failed or went stale.
func (r *runner) effectiveStatus() string {
	st := r.state
	if r.sc.strict || st.PlanStatus == planAborted || st.PlanStatus == planCompleted {
		return st.PlanStatus
	}
	switch d := derivePlanStatus(st.Phases); d {
	case planRunning:
		return d
	case planBlocked:
		// edda never saves "blocked": a blocked plan reads pending and
		// its phases say what happened.
		return planPending
	}
	if st.StartedAt != nil {
		return planRunning
	}
	return planPending
}

// save writes state.json. Outside strict mode it first adopts an abort
// written by `conduct abort` so the run never overwrites it; edda itself
// does not, and its next save silently undoes the abort.
func (r *runner) save() error {
	if r.sc.strict {
		return saveStateFile(r.cwd, r.state)
	}
	return withStateLock(r.cwd, r.plan.Name, func() error {
		r.adoptAbort()
		snapshot := *r.state
		snapshot.PlanStatus = r.effectiveStatus()
		return saveStateFile(r.cwd, &snapshot)
	})
}

// adoptAbort copies an abort recorded on disk into the in-memory state.
func (r *runner) adoptAbort() {
	disk, err := loadState(r.cwd, r.plan.Name)
	if err != nil || disk == nil || disk.PlanStatus != planAborted || r.state.PlanStatus == planAborted {
		return
	}
	r.state.PlanStatus = planAborted
	r.state.AbortedAt = disk.AbortedAt
}

func (r *runner) runnerStatus(current string) {
	snapshot := *r.state
	snapshot.PlanStatus = r.effectiveStatus()
	writeRunnerStatus(r.cwd, &snapshot, current)
}

// staleLeftover is the first phase a dead conductor left running (or
// checking) whose timeout has passed since it started, "" when none.
// Like edda, the run then says the plan is blocked by it and stops, but
// never saves the phase as stale: within the timeout the phase is left
// alone, and `conduct retry`/`skip` refuse a running phase, so such a plan
// cannot be continued through the CLI.
func (r *runner) staleLeftover() string {
	now := time.Now()
	for i := range r.state.Phases {
		ps := &r.state.Phases[i]
		if (ps.Status != phaseRunning && ps.Status != phaseChecking) || ps.StartedAt == nil {
			continue
		}
		started, err := time.Parse(time.RFC3339Nano, *ps.StartedAt)
		if err != nil {
			continue
		}
		limit := time.Duration(r.plan.staleTimeoutSec(r.plan.phase(ps.ID))) * time.Second
		if now.Sub(started) > limit {
			return ps.ID
		}
	}
	return ""
}

func (r *runner) findNextPhase() string {
	for _, id := range r.order {
		ps := r.state.phase(id)
		if ps == nil {
			return ""
		}
		if ps.Status != phasePending {
			continue
		}
		ok := true
		for _, dep := range r.plan.phase(id).DependsOn {
			d := r.state.phase(dep)
			ok = ok && d != nil && (d.Status == phasePassed || d.Status == phaseSkipped)
		}
		if ok {
			return id
		}
	}
	return ""
}

func (r *runner) budgetExhausted() bool {
	return r.plan.BudgetUSD != nil && r.spent >= *r.plan.BudgetUSD
}

func (r *runner) recordCost(c *float64) {
	if c == nil {
		return
	}
	r.spent += *c
	r.state.TotalCostUSD += *c
	r.state.CostMeasured = true
}

// run is the conductor loop. It returns only errors edda would surface
// (state files that cannot be written); every plan outcome is exit 0.
func (r *runner) run() error {
	if id := r.staleLeftover(); id != "" {
		r.notify("Plan blocked: phase %q is Some(Stale). Use retry/skip/abort.", id)
		return nil
	}
	if r.state.StartedAt == nil {
		r.state.StartedAt = strPtr(nowRFC3339())
		r.state.PlanStatus = planRunning
		if err := r.save(); err != nil {
			return err
		}
		r.runnerStatus("")
		r.log.record("plan_start", evPlanStart{PlanName: r.plan.Name, PhaseCount: len(r.order)})
	}

	for {
		if r.ctx.Err() != nil {
			r.say("Shutdown. Run `eddasim conduct run` to resume.")
			break
		}
		if !r.sc.strict {
			r.adoptAbort()
		}
		r.state.updatePlanStatus()
		if r.state.PlanStatus == planAborted {
			break
		}
		if r.state.PlanStatus == planBlocked {
			id, status := "", ""
			for _, p := range r.state.Phases {
				if p.Status == phaseFailed || p.Status == phaseStale {
					id, status = p.ID, p.Status
					break
				}
			}
			r.notify("Plan blocked: phase %q is %s. Use retry/skip/abort.", id, status)
			if !r.sc.strict {
				if err := r.save(); err != nil {
					return err
				}
			}
			break
		}
		if r.budgetExhausted() {
			r.notify("Plan budget exhausted.")
			break
		}
		id := r.findNextPhase()
		if id == "" {
			break
		}
		if err := r.runPhase(id); err != nil {
			return err
		}
		if err := r.save(); err != nil {
			return err
		}
	}

	r.state.updatePlanStatus()
	if r.state.PlanStatus == planCompleted {
		r.state.CompletedAt = strPtr(nowRFC3339())
		if err := r.save(); err != nil {
			return err
		}
		passed := r.state.count(phasePassed)
		r.say("\n✓ Plan %q completed (%d passed)", r.plan.Name, passed)
		var total *float64
		if r.state.CostMeasured {
			total = &r.state.TotalCostUSD
		}
		r.log.record("plan_completed", evPlanCompleted{PhasesPassed: passed, TotalCostUSD: total})
		r.notify("Plan %q completed: %d phases passed.", r.plan.Name, passed)
		var linger time.Duration
		for _, spec := range r.sc.phases {
			linger = max(linger, spec.Linger)
		}
		time.Sleep(linger)
	}
	r.runnerStatus("")
	return nil
}

func (r *runner) runPhase(id string) error {
	ph := r.plan.phase(id)
	ps := r.state.phase(id)
	spec := r.sc.phases[id]
	attempt := ps.Attempts + 1
	num := slices.Index(r.order, id) + 1

	if spec.Skip {
		reason := spec.Reason
		if reason == "" {
			reason = "eddasim: skipped by [sim skip]"
		}
		if _, err := r.state.transition(id, phasePending, phaseSkipped, func(p *PhaseState) { p.SkipReason = strPtr(reason) }); err != nil {
			return err
		}
		r.say("\n⊘ [%d/%d] Phase %q skipped: %s", num, len(r.order), id, reason)
		r.log.record("phase_skipped", evPhaseSkipped{PhaseID: id, Reason: reason})
		return nil
	}

	// The retry context was meant for this attempt's prompt; it is consumed now.
	ps.RetryContext = nil
	now := nowRFC3339()
	if _, err := r.state.transition(id, phasePending, phaseRunning, func(p *PhaseState) {
		p.StartedAt = strPtr(now)
		p.Attempts = attempt
		p.Checks = []CheckResult{}
	}); err != nil {
		return err
	}
	if err := r.save(); err != nil {
		return err
	}
	r.say("\n▶ [%d/%d] Phase %q (attempt %d)", num, len(r.order), id, attempt)
	start := time.Now()
	r.log.record("phase_start", evPhaseStart{PhaseID: id, Attempt: attempt})
	r.runnerStatus(id)
	r.writePhaseEnv(ph)

	if spec.DieAt == attempt {
		fmt.Fprintf(os.Stderr, "eddasim: simulated conductor crash in phase %q (attempt %d)\n", id, attempt)
		os.Exit(dieExitCode)
	}

	tr := r.openTranscript(id)
	var res agentResult
	if reset, hit := r.usageLimit(id, spec); hit {
		select {
		case <-time.After(spec.Delay):
			res, spec = limitedResult(spec, reset)
		case <-r.ctx.Done():
			res = agentResult{kind: agentShutdown, error: "conductor shutdown"}
		}
	} else if stalled, ok := r.stallAgent(ph, spec, tr); !ok {
		res = stalled
	} else {
		res = r.runAgent(ph, spec, attempt)
	}
	if res.kind == agentDone {
		tr.tools(spec.Tools, start, time.Now())
	}
	tr.finish(id, attempt, res)
	elapsed := func() int64 { return time.Since(start).Milliseconds() }

	switch res.kind {
	case agentDone:
		r.recordCost(res.cost)
		if err := r.agentEdit(id, spec, attempt); err != nil {
			return err
		}
		if _, err := r.state.transition(id, phaseRunning, phaseChecking, nil); err != nil {
			return err
		}
		if err := r.save(); err != nil {
			return err
		}
		cr := r.runChecks(ph, spec, attempt, *ps.StartedAt)
		if cr.allPassed {
			if _, err := r.state.transition(id, phaseChecking, phasePassed, func(p *PhaseState) {
				p.CompletedAt = strPtr(nowRFC3339())
				p.Checks = cr.results
			}); err != nil {
				return err
			}
			r.say("  ✓ Phase %q passed (%s)", id, time.Since(start).Round(time.Millisecond))
			r.log.record("phase_passed", evPhasePassed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), CostUSD: res.cost})
			return nil
		}
		if _, err := r.state.transition(id, phaseChecking, phaseFailed, func(p *PhaseState) {
			p.Checks = cr.results
			p.Error = cr.err
		}); err != nil {
			return err
		}
		msg, etype := "check failed", errCheckFailed
		if cr.err != nil {
			msg, etype = cr.err.Message, cr.err.ErrorType
		}
		r.say("  ✗ Phase %q failed (%s): %s", id, time.Since(start).Round(time.Millisecond), msg)
		r.log.record("phase_failed", evPhaseFailed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), Error: msg, ErrorType: etype})
		return r.handleOnFail(ph, cr.results)

	case agentTimeout:
		if _, err := r.state.transition(id, phaseRunning, phaseStale, func(p *PhaseState) {
			p.Error = &ErrorInfo{ErrorType: errTimeout, Message: fmt.Sprintf("phase %q timed out", id), Retryable: true, Timestamp: nowRFC3339()}
		}); err != nil {
			return err
		}
		r.say("  ⏰ Phase %q timed out (%s)", id, time.Since(start).Round(time.Millisecond))
		r.log.record("phase_failed", evPhaseFailed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), Error: "timed out", ErrorType: errTimeout})
		return nil

	case agentShutdown:
		// edda's Ctrl+C: the agent is killed, the attempt recorded as
		// failed, and the phase put back to pending whatever attempts are
		// left, so the next `conduct run` continues the plan.
		if _, err := r.state.transition(id, phaseRunning, phaseFailed, func(p *PhaseState) {
			p.Error = &ErrorInfo{ErrorType: errAgentCrash, Message: res.error, Retryable: true, Timestamp: nowRFC3339()}
		}); err != nil {
			return err
		}
		if _, err := r.state.transition(id, phaseFailed, phasePending, nil); err != nil {
			return err
		}
		r.say("  ✗ Phase %q interrupted (%s)", id, time.Since(start).Round(time.Millisecond))
		r.log.record("phase_failed", evPhaseFailed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), Error: res.error, ErrorType: errAgentCrash})
		return nil

	case agentCrash:
		if _, err := r.state.transition(id, phaseRunning, phaseFailed, func(p *PhaseState) {
			p.Error = &ErrorInfo{ErrorType: errAgentCrash, Message: res.error, Retryable: true, Timestamp: nowRFC3339()}
		}); err != nil {
			return err
		}
		r.say("  ✗ Phase %q crashed (%s): %s", id, time.Since(start).Round(time.Millisecond), res.error)
		fmt.Fprintf(os.Stderr, "eddasim: agent of phase %q crashed (attempt %d): %s\n", id, attempt, res.error)
		r.log.record("phase_failed", evPhaseFailed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), Error: res.error, ErrorType: errAgentCrash})
		return r.handleOnFail(ph, nil)

	default: // max turns or budget: failed, not retried, plan blocked at the next loop
		r.recordCost(res.cost)
		msg := agentResultDebug(res)
		if _, err := r.state.transition(id, phaseRunning, phaseFailed, func(p *PhaseState) {
			p.Error = &ErrorInfo{ErrorType: errBudgetExceeded, Message: msg, Retryable: false, Timestamp: nowRFC3339()}
		}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "eddasim: phase %q stopped by the agent: %s\n", id, msg)
		r.log.record("phase_failed", evPhaseFailed{PhaseID: id, Attempt: attempt, DurationMS: elapsed(), Error: msg, ErrorType: errBudgetExceeded})
		return nil
	}
}

// runChecks applies the check directives, or runs the phase's checks.
func (r *runner) runChecks(ph *Phase, spec simSpec, attempt int, startedAt string) checkRun {
	forced := func(msg string) checkRun {
		if spec.Error != "" {
			msg = spec.Error
		}
		first := CheckSpec{Type: "eddasim"}
		if len(ph.Check) > 0 {
			first = ph.Check[0]
		}
		results := []CheckResult{{CheckType: first.Type, Status: "failed", Detail: strPtr(msg)}}
		for _, c := range ph.Check[min(1, len(ph.Check)):] {
			results = append(results, CheckResult{CheckType: c.Type, Status: "waiting"})
		}
		idx := 0
		return checkRun{results: results, err: &ErrorInfo{ErrorType: errCheckFailed, Message: msg, Retryable: first.retryable(), CheckIndex: &idx, Timestamp: nowRFC3339()}}
	}
	if spec.failsAt(attempt) {
		return forced(fmt.Sprintf("exit 1: eddasim: simulated check failure (attempt %d)", attempt))
	}
	switch spec.Checks {
	case "pass":
		results := []CheckResult{}
		for _, c := range ph.Check {
			results = append(results, CheckResult{CheckType: c.Type, Status: "passed"})
		}
		return checkRun{allPassed: true, results: results}
	case "fail":
		if len(ph.Check) == 0 {
			return checkRun{allPassed: true, results: []CheckResult{}}
		}
		return forced("eddasim: forced check failure (checks=fail)")
	}
	return r.engine.runAll(ph.Check, startedAt)
}

func (r *runner) handleOnFail(ph *Phase, results []CheckResult) error {
	ps := r.state.phase(ph.ID)
	switch r.plan.onFail(ph) {
	case OnFailAutoRetry:
		limit := r.plan.maxAttempts(ph)
		if ps.Attempts < limit {
			ps.RetryContext = strPtr(formatCheckFailures(results))
			if _, err := r.state.transition(ph.ID, phaseFailed, phasePending, nil); err != nil {
				return err
			}
			r.say("  ↻ Auto-retrying (%d/%d)", ps.Attempts, limit)
			return nil
		}
		r.notify("Phase %q failed after %d attempts. Retry, skip, or abort?", ph.ID, limit)
	case OnFailSkip:
		const reason = "auto-skipped by on_fail policy"
		ps.Status = phaseSkipped
		ps.SkipReason = strPtr(reason)
		r.log.record("phase_skipped", evPhaseSkipped{PhaseID: ph.ID, Reason: reason})
		r.say("  → Skipped (on_fail: skip)")
	case OnFailAbort:
		r.state.PlanStatus = planAborted
		r.state.AbortedAt = strPtr(nowRFC3339())
		r.log.record("plan_aborted", evPlanAborted{PhasesPassed: r.state.count(phasePassed), PhasesPending: r.state.count(phasePending)})
		r.say("  → Plan aborted (on_fail: abort)")
	case OnFailAsk:
		r.notify("Phase %q failed. Retry, skip, or abort?", ph.ID)
	}
	return nil
}

func formatCheckFailures(results []CheckResult) string {
	var b strings.Builder
	for _, c := range results {
		detail := "(no detail)"
		if c.Detail != nil {
			detail = *c.Detail
		}
		fmt.Fprintf(&b, "- %s [%s]: %s\n", c.CheckType, c.Status, detail)
	}
	return b.String()
}

// writePhaseEnv records the environment edda would hand the phase's agent:
// the phase's own env map only. edda's launcher does not apply the plan-level
// env, so REDISPATCH must be set on every phase to reach it.
func (r *runner) writePhaseEnv(ph *Phase) {
	env := ph.Env
	if env == nil {
		env = map[string]string{}
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err == nil {
		err = writeAtomic(filepath.Join(stateDir(r.cwd, r.plan.Name), "phase-env-"+ph.ID+".json"), data)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: phase env of %q not written: %v\n", ph.ID, err)
	}
}

// agentResultDebug renders a budget/max-turns result the way edda's error
// message shows it (Rust Debug formatting).
func agentResultDebug(res agentResult) string {
	name := "BudgetExceeded"
	if res.kind == agentMaxTurns {
		name = "MaxTurns"
	}
	cost := "None"
	if res.cost != nil {
		cost = "Some(" + rustFloat(*res.cost) + ")"
	}
	return name + " { cost_usd: " + cost + " }"
}

func rustFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}
