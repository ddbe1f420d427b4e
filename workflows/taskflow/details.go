package taskflow

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// What a person sees of a task in the Web UI: the summary and details fixed
// at start (StartWorkflowOptions.StaticSummary, StaticDetails), and the
// current details the workflow keeps up to date (workflow.SetCurrentDetails),
// a markdown table of the phases. Both are pure functions of the state, so
// they are the same on every replay. (They write with fmt.Sprintf rather
// than fmt.Fprintf: workflowcheck follows Fprintf's io.Writer and cannot
// tell a strings.Builder from a file.)

const (
	summaryRunes = taskapi.SummaryRunes
	noteRunes    = 60  // an error or skip reason, in a table cell
	outcomeRunes = 400 // how the task ended, above the table
)

// renderDetails is the workflow's current details: where the attempt stands
// and one table row per phase, in plan order (never in map order, so the
// text is the same on every replay).
func renderDetails(st *State) string {
	a := &st.Current
	br := &a.Brief.Brief
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**%s** · attempt %d · %s", st.Dispatch.TaskID, a.N, stageWords(a.Stage)))
	if st.TaskStatus != "" {
		b.WriteString(fmt.Sprintf(" · task %s", st.TaskStatus))
	}
	b.WriteString("\n\n")
	// How it ended goes first: the Web UI shows the first lines of the
	// details without scrolling.
	if o := a.Outcome; o != nil {
		b.WriteString("**" + string(o.TaskStatus) + "**")
		if o.LastError != "" {
			b.WriteString(": " + oneLine(o.LastError, outcomeRunes))
		}
		b.WriteString("\n\n")
	}
	if p := st.Pause; p != nil {
		b.WriteString(pauseWords(p) + "\n\n")
	}
	if a.Stall != nil && a.Stage == taskapi.StageRunning {
		b.WriteString(stallWords(a.Stall) + "\n\n")
	}
	if w := slotWords(a); w != "" {
		b.WriteString(w + "\n\n")
	}
	if a.Plan == nil {
		b.WriteString("Preparing the plan.\n")
		return b.String()
	}
	b.WriteString(fmt.Sprintf("plan `%s`", a.PlanName()))
	if a.Host != "" {
		b.WriteString(" on host " + a.Host)
	}
	if br.CurrentPhase != "" && a.Stage == taskapi.StageRunning {
		b.WriteString(fmt.Sprintf(" · current phase **%s**", br.CurrentPhase))
	}
	// "1 of 3", not "1/3": the UI's markdown turns the latter into a fraction.
	b.WriteString(fmt.Sprintf(" · %d of %d phases done", br.CompletedPhases, len(a.Brief.PhaseOrder)))
	if cost := spent(a.Brief); cost > 0 {
		b.WriteString(fmt.Sprintf(" · $%.2f", cost))
	}
	b.WriteString("\n\n| phase | status | attempts | duration | cost | note |\n|---|---|---|---|---|---|\n")
	for _, id := range a.Brief.PhaseOrder {
		p := br.Phases[id]
		name := id
		if id == br.CurrentPhase && a.Stage == taskapi.StageRunning {
			name = "**" + id + "**"
		}
		attempts, duration, cost := "", "", ""
		if p.Attempts > 0 {
			attempts = fmt.Sprint(p.Attempts)
		}
		if p.DurationMS != nil {
			duration = formatDuration(time.Duration(*p.DurationMS) * time.Millisecond)
		}
		if p.CostUSD != nil {
			cost = fmt.Sprintf("$%.2f", *p.CostUSD)
		}
		note := p.Error
		if note == "" {
			note = p.Reason
		}
		b.WriteString(fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", name, p.Status, attempts, duration, cost,
			strings.ReplaceAll(oneLine(note, noteRunes), "|", `\|`)))
	}
	return b.String()
}

func stageWords(s taskapi.Stage) string {
	switch s {
	case taskapi.StagePrepare:
		return "preparing"
	case taskapi.StageStart:
		return "starting the conductor"
	case taskapi.StageRunning:
		return "running"
	case taskapi.StageFinish:
		return "finishing"
	case taskapi.StageDone:
		return "ended"
	case taskapi.StagePaused:
		return "paused"
	}
	return string(s)
}

// pauseWords says why the task waits and until when.
func pauseWords(p *taskapi.Pause) string {
	if p.Reason == taskapi.PausedBudget {
		return fmt.Sprintf("**paused** (budget) in phase %s: %s · `starter budget set` or `starter resume` ends it", p.Phase, p.Budget)
	}
	s := fmt.Sprintf("**paused** (%s) in phase %s until %s UTC", p.Reason, p.Phase, p.Until.UTC().Format("2006-01-02 15:04:05"))
	if p.Account != "" {
		s += fmt.Sprintf(" (account %s", p.Account)
		if p.By != "" {
			s += ", met by task " + p.By
		}
		s += ")"
	}
	if p.Text != "" {
		s += ": " + oneLine(p.Text, noteRunes)
	}
	return s + " · `starter resume` ends it now"
}

// spent is what the attempt cost so far: the plan's total once the
// conductor reported it, else the sum of the phases' costs.
func spent(s mapping.BriefState) float64 {
	if t := s.Brief.Cost.TotalUSD; t != nil {
		return *t
	}
	var sum float64
	for _, id := range s.PhaseOrder {
		sum += s.Brief.Cost.ByPhase[id]
	}
	return sum
}

// formatDuration rounds to what a person reads: 850ms, 12s, 2m5s.
func formatDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// oneLine folds free text onto one line of at most n runes.
func oneLine(s string, n int) string {
	return taskapi.Cut(strings.Join(strings.Fields(s), " "), n)
}

// showDetails publishes the current details; the Web UI reads them with the
// workflow's metadata query.
func (r *taskRun) showDetails() {
	workflow.SetCurrentDetails(r.ctx, renderDetails(&r.st))
}

// The summaries activities carry into history, so the Web UI's timeline
// reads "tail karvi-t5-020d01 from byte 1234" rather than "TailEvents".

func tailSummary(verb string, a *Attempt) string {
	s := fmt.Sprintf("%s %s from byte %d", verb, a.PlanName(), a.Cursor.Offset)
	if a.Cursor.Gen > 0 {
		s += fmt.Sprintf(" (log generation %d)", a.Cursor.Gen)
	}
	return s
}

func patchSummary(patches []mapping.Patch, logEntries int) string {
	var types []string
	for _, p := range patches {
		if len(types) == 0 || types[len(types)-1] != p.Type {
			types = append(types, p.Type)
		}
	}
	n := "1 patch"
	if len(patches) != 1 {
		n = fmt.Sprintf("%d patches", len(patches))
	}
	return taskapi.Cut(fmt.Sprintf("%s (%s), log %d entries", n, strings.Join(types, ", "), logEntries), summaryRunes)
}

func statusSummary(u taskact.TaskStatusUpdate) string {
	s := "status " + string(u.Status)
	if u.Reason != "" {
		s += ": " + u.Reason
	}
	return taskapi.Cut(strings.Join(strings.Fields(s), " "), summaryRunes)
}
