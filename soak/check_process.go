package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// wants reports whether the workflow, as the point shows it, wants the
// conductor of run directory dir on host running: the chain is open, the
// run belongs to its current attempt, on the attempt's host when both are
// known, and the attempt is under way (not paused, not done).
func wants(p point, dir, host string) bool {
	if !p.S.Open || p.S.PlanName == "" || AttemptPlan(dir) != p.S.PlanName {
		return false
	}
	if host != "" && p.S.Host != "" && host != p.S.Host {
		return false
	}
	switch p.S.Stage {
	case "paused", "done":
		return false
	}
	return true
}

// attemptEndedBy reports whether the task's attempt of plan had ended by
// t, by the final word of its workflow.
func attemptEndedBy(o *Observed, task, plan string, t time.Time) bool {
	tk := o.Task(task)
	if tk == nil || tk.Workflow == nil {
		return false
	}
	for _, a := range tk.Workflow.Attempts {
		if a.PlanName == plan && !a.EndedAt.IsZero() && !a.EndedAt.After(t) {
			return true
		}
	}
	return false
}

// CheckConductorKeptWhileWanted: a worker's fence must not stop a
// conductor its workflow still wants. A stop is judged by the task's
// status sampled just before it: the chain open, the stopped run a run of
// the current attempt, the attempt under way. It is excused when the
// sample after it shows the workflow at another attempt, or the
// workflow's record shows the attempt ended before the stop (the sample
// before it was late).
func CheckConductorKeptWhileWanted(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	tls := timelines(o)
	var out []Violation
	for _, f := range o.FenceStops {
		tl := tls[f.Task]
		before, after := around(tl, f.At)
		if !fresh(before, f.At, c) || !wants(*before, f.Plan, f.Host) {
			continue
		}
		plan := AttemptPlan(f.Plan)
		if after != nil && after.S.Open && after.S.PlanName != "" && after.S.PlanName != plan {
			continue
		}
		if attemptEndedBy(o, f.Task, plan, f.At.Add(c.Slack)) {
			continue
		}
		next := "no later sample"
		if after != nil {
			next = fmt.Sprintf("at %s it was %s", ts(after.At), describe(after.S))
		}
		host := ""
		if f.Host != "" {
			host = " on host " + f.Host
		}
		out = append(out, violation(InvConductorKeptWhileWanted, f.Task, f.At,
			"the fence%s stopped conductor runs/%s/%s (why: %q) while the workflow wanted it: at %s it was %s; %s",
			host, f.Task, f.Plan, f.Why, ts(before.At), describe(before.S), next))
	}
	return out
}

// CheckStoppedTaskEnds: a task that ended blocked because its conductor
// was stopped or died (its last error says so: Config.StopErrors) needs a
// cause in the journal: a crash or a stall the mix injected into it, an
// abort, a cancel, a redispatch or a send-back of it or of its run. A
// usage limit is no such cause: its pause stops the conductor to resume
// it, and a task that ends there was stopped by mistake.
func CheckStoppedTaskEnds(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, t := range o.Tasks {
		w := t.Workflow
		if w == nil || !w.Closed || w.Outcome != "blocked" {
			continue
		}
		msg := strings.ToLower(w.OutcomeError)
		hit := ""
		for _, s := range c.StopErrors {
			if s != "" && strings.Contains(msg, strings.ToLower(s)) {
				hit = s
				break
			}
		}
		if hit == "" {
			continue
		}
		if journalHas(o, t.ID, taskRun(o, t.ID), farPast, farFuture,
			RecAbort, RecCancel, RecRedispatch, RecSendBack) != nil || stoppingFault(o, t.ID) {
			continue
		}
		out = append(out, violation(InvConductorKeptWhileWanted, t.ID, time.Time{},
			"the task ended blocked at attempt %d (plan %s) with %q, which says its conductor was stopped (%q), and the journal has no fault, abort, cancel, redispatch or send-back of it",
			w.Attempt, w.PlanName, w.OutcomeError, hit))
	}
	return out
}

// episode gathers the samples of one continuing condition.
type episode struct {
	key         string
	task        string
	first, last time.Time
	n           int
	detail      string
}

func (e *episode) see(at time.Time, detail string) {
	if e.n == 0 {
		e.first = at
		e.detail = detail
	}
	e.last = at
	e.n++
}

// CheckOneConductorPerAttempt: no sample shows two live conductors (run
// directories with a live process group) of one attempt of a task.
func CheckOneConductorPerAttempt(o *Observed, _ Config) []Violation {
	eps := map[string]*episode{}
	var order []string
	for _, s := range o.Samples {
		groups := map[[2]string][]LiveConductor{}
		for _, lc := range s.Conductors {
			k := [2]string{lc.Task, AttemptPlan(lc.Dir)}
			groups[k] = append(groups[k], lc)
		}
		for k, lcs := range groups {
			if len(lcs) < 2 {
				continue
			}
			sort.Slice(lcs, func(i, j int) bool { return lcs[i].Dir < lcs[j].Dir })
			var parts []string
			for _, lc := range lcs {
				parts = append(parts, fmt.Sprintf("runs/%s/%s (pgid %d)", lc.Task, lc.Dir, lc.PGID))
			}
			key := k[0] + "\x00" + strings.Join(parts, ",")
			e, ok := eps[key]
			if !ok {
				e = &episode{key: key, task: k[0]}
				eps[key] = e
				order = append(order, key)
			}
			e.see(s.At, fmt.Sprintf("attempt %s had %d live conductors: %s", k[1], len(lcs), strings.Join(parts, ", ")))
		}
	}
	var out []Violation
	for _, k := range order {
		e := eps[k]
		out = append(out, violation(InvOneConductorPerAttempt, e.task, e.first,
			"%s, in %d samples from %s to %s", e.detail, e.n, ts(e.first), ts(e.last)))
	}
	return out
}

// CheckNoProcessOutlivesAttempt: a live conductor whose attempt ended (its
// workflow closed or done, paused, or at another attempt, by the task's
// latest sampled status) may live on for Config.Grace, the time its stop
// takes and the samples lag; one still alive after that outlived its
// attempt. A conductor whose task has no sampled status is not judged.
func CheckNoProcessOutlivesAttempt(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	tls := timelines(o)
	type key struct {
		task, dir string
		pgid      int
	}
	since := map[key]time.Time{}
	why := map[key]string{}
	reported := map[key]bool{}
	first := map[key]time.Time{}
	var out []Violation
	for _, s := range o.Samples {
		for _, lc := range s.Conductors {
			k := key{lc.Task, lc.Dir, lc.PGID}
			if _, ok := first[k]; !ok {
				first[k] = s.At
			}
			before, _ := around(tls[lc.Task], s.At)
			if !fresh(before, s.At, c) {
				continue // nothing to judge by; keep what was seen
			}
			// A conductor first seen after its task's workflow closed is
			// a later workflow's (a send-back, a run's next loop, a
			// reused id) until a status taken since says otherwise: a
			// closed chain's status never goes stale, but it does not
			// speak for the next chain.
			if !before.S.Open && before.At.Before(first[k]) {
				continue
			}
			if wants(*before, lc.Dir, lc.Host) {
				delete(since, k)
				continue
			}
			if _, ok := since[k]; !ok {
				since[k] = before.At
				why[k] = fmt.Sprintf("at %s the workflow was %s", ts(before.At), describe(before.S))
			}
			if reported[k] || s.At.Sub(since[k]) <= c.Grace {
				continue
			}
			reported[k] = true
			out = append(out, violation(InvNoProcessOutlivesAttempt, lc.Task, s.At,
				"conductor runs/%s/%s (pgid %d) still alive at %s, %s after its attempt ended: %s",
				lc.Task, lc.Dir, lc.PGID, ts(s.At), s.At.Sub(since[k]).Round(time.Millisecond), why[k]))
		}
	}
	return out
}

// CheckNothingLeftRunning: once the driver stopped everything it started,
// no process of the soak may be left: conductors, their agents, workers,
// servers.
func CheckNothingLeftRunning(o *Observed, _ Config) []Violation {
	ps := slices.Clone(o.Leftovers)
	sort.Slice(ps, func(i, j int) bool { return ps[i].PID < ps[j].PID })
	var out []Violation
	for _, p := range ps {
		where := ""
		if p.Dir != "" {
			where = fmt.Sprintf(" of runs/%s/%s", p.Task, p.Dir)
		}
		cmd := ""
		if p.Cmd != "" {
			cmd = fmt.Sprintf(" (%s)", p.Cmd)
		}
		out = append(out, violation(InvNothingLeftRunning, p.Task, o.End,
			"%s pid %d (pgid %d)%s still running at the end%s", p.What, p.PID, p.PGID, where, cmd))
	}
	return out
}

// describe says what a sampled status shows, for evidence.
func describe(s TaskSample) string {
	if !s.Open {
		return "closed"
	}
	d := fmt.Sprintf("%s at attempt %d (plan %s", s.Stage, s.Attempt, s.PlanName)
	if s.Host != "" {
		d += ", host " + s.Host
	}
	if s.Phase != "" {
		d += ", phase " + s.Phase
	}
	d += ")"
	if s.Pause != nil {
		d += fmt.Sprintf(", paused (%s) since %s", s.Pause.Reason, ts(s.Pause.Since))
		if !s.Pause.Until.IsZero() {
			d += " until " + ts(s.Pause.Until)
		}
		if !s.Pause.ResetAt.IsZero() {
			d += ", reset " + ts(s.Pause.ResetAt)
		}
		if s.Pause.Account != "" {
			d += ", account " + s.Pause.Account
		}
	}
	return d
}

// stoppingFault reports whether the mix made one of the task's phases
// crash or stall (a stall's action may stop the conductor).
func stoppingFault(o *Observed, task string) bool {
	for _, r := range o.Journal {
		if r.Kind == RecFault && r.Task == task {
			switch r.Detail("fault") {
			case "crash", "die", "stall":
				return true
			}
		}
	}
	return false
}
