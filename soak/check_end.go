package soak

import (
	"fmt"
	"strings"
	"time"
)

// briefLogCap is how many entries a brief's log keeps (the newest).
const briefLogCap = 500

// CheckEndsOnceAndAgrees: every task ended, exactly once, and the places
// that record its end agree: its workflow's outcome, the status query's
// task status, karvi's board, the brief (its attempt, no phase left
// running, every phase done when it completed) and its run's status.json.
func CheckEndsOnceAndAgrees(o *Observed, _ Config) []Violation {
	var out []Violation
	add := func(task, format string, args ...any) {
		out = append(out, violation(InvEndsOnceAndAgrees, task, time.Time{}, format, args...))
	}
	for _, t := range o.Tasks {
		w := t.Workflow
		rs := t.RunStatus
		if w == nil {
			if rs != nil && (rs.Status == "blocked" || rs.Status == "skipped" || rs.Status == "excluded") {
				continue // a run's task that never started
			}
			if rs != nil && rs.Status == "queued" && runBudgetStopped(o, t.Run) {
				continue // its run's blocking budget was spent: the run starts nothing more
			}
			if t.Board != nil && t.Board.Status == "cancelled" && journalHas(o, t.ID, t.Run, farPast, farFuture, RecCancel) != nil {
				continue // cancelled on the board before anything ran it
			}
			add(t.ID, "never ended: no workflow of the task was found")
			continue
		}
		if !w.Closed {
			add(t.ID, "never ended: at the end its workflow was still %s at attempt %d (plan %s)", w.Stage, w.Attempt, w.PlanName)
			continue
		}
		if w.CloseStatus != "" && w.CloseStatus != "completed" {
			add(t.ID, "its workflow closed %s, not with an outcome (attempt %d, plan %s)", w.CloseStatus, w.Attempt, w.PlanName)
		}
		if t.Run == "" && w.Closes > 1 {
			starts := 0
			for _, r := range o.Journal {
				if r.Task == t.ID && (r.Kind == RecTaskStart || r.Kind == RecBoardAdd || r.Kind == RecSendBack || r.Kind == RecRedispatch) {
					starts++
				}
			}
			if w.Closes > max(starts, 1) {
				add(t.ID, "ended %d times (workflows of the task that closed), and the journal started or reopened it %d times", w.Closes, max(starts, 1))
			}
		}
		if b := t.Board; b != nil {
			var prev *StatusChange
			for i := range b.History {
				h := &b.History[i]
				if !terminalStatus(h.Status) {
					prev = nil
					continue
				}
				if prev != nil {
					add(t.ID, "karvi's history shows it ended twice with nothing reopening it between: %s at %s, then %s at %s",
						prev.Status, ts(prev.At), h.Status, ts(h.At))
				}
				prev = h
			}
		}
		oc := w.Outcome
		if oc == "" {
			add(t.ID, "its workflow closed without an outcome (attempt %d, plan %s)", w.Attempt, w.PlanName)
			continue
		}
		// The status last written; a write skipped at the end (karvi
		// refused it: the task was cancelled there) leaves an earlier one.
		if terminalStatus(w.TaskStatus) && w.TaskStatus != oc {
			add(t.ID, "the workflow's status says task status %s, its outcome %s", w.TaskStatus, oc)
		}
		if b := t.Board; b != nil && b.Status != oc {
			cancelled := b.Status == "cancelled" && journalHas(o, t.ID, t.Run, farPast, farFuture, RecCancel) != nil
			if !cancelled {
				add(t.ID, "karvi says %s (blocker %q), the workflow ended %s at attempt %d (plan %s, last error %q)",
					b.Status, b.Blocker, oc, w.Attempt, w.PlanName, w.OutcomeError)
			}
		}
		if br := t.Brief; br != nil {
			if br.PlanName != "" && w.PlanName != "" && br.PlanName != w.PlanName {
				add(t.ID, "the brief is about plan %s, the workflow ended with plan %s (attempt %d)", br.PlanName, w.PlanName, w.Attempt)
			}
			for _, id := range sortedKeys(br.Phases) {
				st := br.Phases[id]
				switch {
				case st == "running" || st == "checking":
					add(t.ID, "the task ended %s but its brief shows phase %s %s (plan %s)", oc, id, st, br.PlanName)
				case oc == "completed" && st != "passed" && st != "skipped":
					add(t.ID, "the task completed but its brief shows phase %s %s (plan %s)", id, st, br.PlanName)
				}
			}
		}
		if rs != nil {
			switch {
			case rs.Status == "running" || rs.Status == "paused" || rs.Status == "queued":
				add(t.ID, "its run's status.json still says %s, the workflow ended %s", rs.Status, oc)
			case rs.Status == "done" && oc != "completed":
				add(t.ID, "its run's status.json says done, the workflow ended %s (last error %q)", oc, w.OutcomeError)
			case oc == "completed" && rs.Status != "done" && !strings.HasPrefix(rs.Error, "merge") && !strings.HasPrefix(rs.Error, "worktree"):
				add(t.ID, "the workflow completed, its run's status.json says %s (error %q)", rs.Status, rs.Error)
			}
		}
	}
	return out
}

// CheckBriefLogMatchesEvents: for every task that ended, the conductor's
// entries in its brief's log are its attempt's events.jsonl, one for one
// and in order (a plan_aborted makes no entry; the log keeps the newest
// 500 entries).
func CheckBriefLogMatchesEvents(o *Observed, _ Config) []Violation {
	var out []Violation
	for _, t := range o.Tasks {
		if t.Workflow == nil || !t.Workflow.Closed || t.Brief == nil {
			continue
		}
		plan := t.Brief.PlanName
		if plan == "" {
			plan = t.Workflow.PlanName
		}
		var events []Event
		malformed := 0
		for _, p := range t.Plans {
			if p.Name == plan {
				malformed = p.Malformed
				for _, e := range p.Events {
					if e.Type != "plan_aborted" {
						events = append(events, e)
					}
				}
			}
		}
		var logs []LogEntry
		for _, l := range t.Brief.Log {
			if l.Agent == "conductor" {
				logs = append(logs, l)
			}
		}
		if len(t.Brief.Log) >= briefLogCap && len(events) > len(logs) {
			events = events[len(events)-len(logs):]
		}
		first := -1
		for i := range min(len(logs), len(events)) {
			if !entryMatches(logs[i], events[i]) {
				first = i
				break
			}
		}
		if first < 0 && len(logs) == len(events) {
			continue
		}
		// A conductor left out of reach wrote on past what was delivered.
		if first < 0 && len(logs) < len(events) && unreached(t)[plan] {
			continue
		}
		d := fmt.Sprintf("plan %s: the brief's log has %d conductor entries, events.jsonl %d events", plan, len(logs), len(events))
		if malformed > 0 {
			d += fmt.Sprintf(" (and %d malformed lines)", malformed)
		}
		switch {
		case first >= 0:
			l, e := logs[first], events[first]
			d += fmt.Sprintf("; entry %d differs: log {%s %s %q}, events.jsonl line %d {%s %s %s}",
				first+1, l.Time, l.Action, l.Detail, e.Line, e.Time, e.Type, e.Phase)
		case len(logs) > len(events):
			l := logs[len(events)]
			d += fmt.Sprintf("; first extra log entry: {%s %s %q}", l.Time, l.Action, l.Detail)
		default:
			e := events[len(logs)]
			d += fmt.Sprintf("; first event missing from the log: line %d {%s %s %s}", e.Line, e.Time, e.Type, e.Phase)
		}
		out = append(out, violation(InvBriefLogMatchesEvents, t.ID, time.Time{}, "%s", d))
	}
	return out
}

// entryMatches reports whether a log entry is the one an event makes: the
// same type, the same time when the event has one, and a detail that names
// the event's phase.
func entryMatches(l LogEntry, e Event) bool {
	if l.Action != e.Type {
		return false
	}
	if e.Time != "" && l.Time != e.Time {
		return false
	}
	return e.Phase == "" || strings.HasPrefix(l.Detail, e.Phase)
}

// CheckWebhookIDsUnique: a delivery id names one event. A retry repeats
// it with the same body; the same id on a different body is an id reused
// by another event, which a receiver that drops duplicates would lose.
func CheckWebhookIDsUnique(o *Observed, _ Config) []Violation {
	byID := map[string][]Webhook{}
	var order []string
	for _, w := range o.Webhooks {
		if _, ok := byID[w.ID]; !ok {
			order = append(order, w.ID)
		}
		byID[w.ID] = append(byID[w.ID], w)
	}
	var out []Violation
	for _, id := range order {
		ws := byID[id]
		seen := map[string]bool{}
		var distinct []Webhook
		for _, w := range ws {
			if !seen[w.Digest] {
				seen[w.Digest] = true
				distinct = append(distinct, w)
			}
		}
		if len(distinct) < 2 {
			continue
		}
		var parts []string
		for i, w := range distinct {
			if i == 4 {
				parts = append(parts, fmt.Sprintf("and %d more", len(distinct)-4))
				break
			}
			parts = append(parts, fmt.Sprintf("%s task=%s run=%s time=%s received %s", w.Kind, w.Task, w.Run, w.Time, ts(w.At)))
		}
		out = append(out, violation(InvWebhookIDsUnique, distinct[0].Task, distinct[1].At,
			"delivery id %s names %d different events: %s", id, len(distinct), strings.Join(parts, "; ")))
	}
	return out
}

// runBudgetStopped reports whether run may have stopped on its blocking
// budget: the run then aborts what runs, starts nothing more and ends
// partial, leaving its other tasks queued in status.json. A task of it
// ended on the budget says so; so does a run started with a blocking
// budget whose every started task has closed (the budget can be spent at
// a report while no task runs, and then no task ends on it).
func runBudgetStopped(o *Observed, run string) bool {
	if run == "" {
		return false
	}
	blocking := false
	for _, r := range o.Journal {
		if r.Kind == RecRunStart && r.Run == run && r.Details["budgetAction"] == "block" {
			blocking = true
		}
	}
	allClosed := true
	for _, t := range o.Tasks {
		if t.Run != run || t.Workflow == nil {
			continue
		}
		if t.Workflow.Closed && strings.Contains(t.Workflow.OutcomeError, "Budget exceeded") {
			return true
		}
		allClosed = allClosed && t.Workflow.Closed
	}
	return blocking && allClosed
}
