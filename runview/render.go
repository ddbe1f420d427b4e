package runview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"karvi-edda-temporal/runplan"
	"karvi-edda-temporal/runstatus"
)

// Options say when and how a view is drawn.
type Options struct {
	// Now is the moment the view is drawn at: a running task's or an
	// unfinished run's duration ends here. The caller passes its clock so a
	// drawing depends on nothing but its arguments.
	Now time.Time
	// Location is the time zone of the times shown; nil is UTC.
	Location *time.Location
	// Color marks statuses with ANSI colours: only for a terminal.
	Color bool
}

// Bounds that keep a big run to a few screens. What is cut is counted.
const (
	// MaxRows is the most task rows the table shows; tasks that need a look
	// (running, failed, paused, in conflict) are shown first.
	MaxRows = 30
	// MaxGraphTasks is the most tasks the graph draws one by one; a bigger
	// run is drawn level by level with counts.
	MaxGraphTasks = 40
	// MaxGraphLevels is the most levels a graph of counts shows.
	MaxGraphLevels = 30
	// MaxListed is the most entries of one kind a warning or blocker list
	// shows.
	MaxListed = 8
	// MaxNames is the most task ids or paths named on one line.
	MaxNames = 6
	// maxNote is the most characters of an error shown in the table.
	maxNote = 80
)

// Render draws v as text, sections separated by blank lines, ending in a
// newline.
func Render(v View, o Options) string {
	if o.Location == nil {
		o.Location = time.UTC
	}
	d := newDrawing(v, o)
	var sections []string
	for _, s := range []func() string{d.header, d.progress, d.table, d.graph, d.warnings, d.blockers, d.summary} {
		if text := s(); text != "" {
			sections = append(sections, text)
		}
	}
	return strings.Join(sections, "\n\n") + "\n"
}

// drawing is one view being drawn: the view's tasks joined with their
// entries in the status document, in run file order.
type drawing struct {
	v     View
	o     Options
	tasks []task
	index map[string]int
	// dependents lists, per task, the tasks that depend on it directly, in
	// run file order.
	dependents map[string][]string
}

type task struct {
	TaskView
	*runstatus.Task
}

func newDrawing(v View, o Options) *drawing {
	d := &drawing{v: v, o: o, index: make(map[string]int, len(v.Tasks)), dependents: map[string][]string{}}
	for i, tv := range v.Tasks {
		st := v.Status.Tasks[tv.ID]
		if st == nil {
			// A view should never lack a task's entry; drawing it as
			// unknown beats hiding the task.
			st = &runstatus.Task{Status: "unknown"}
		}
		d.tasks = append(d.tasks, task{TaskView: tv, Task: st})
		d.index[tv.ID] = i
	}
	for _, t := range d.tasks {
		for _, dep := range t.Depends {
			d.dependents[dep] = append(d.dependents[dep], t.ID)
		}
	}
	return d
}

func (d *drawing) ended() bool {
	return d.v.Status.Status == runstatus.RunComplete || d.v.Status.Status == runstatus.RunPartial
}

// header: the run, its state, its times, its concurrency.
func (d *drawing) header() string {
	var b strings.Builder
	b.WriteString("run " + d.v.Slug)
	if d.v.Title != "" {
		b.WriteString(" · " + d.v.Title)
	}
	b.WriteString("\n" + d.paintRun(d.v.Status.Status))
	s := d.v.Status
	switch {
	case s.StartedAt.IsZero():
		b.WriteString(" · not started")
	case d.ended():
		fmt.Fprintf(&b, " · started %s · ended %s after %s", d.date(s.StartedAt), d.clock(s.CompletedAt), span(s.StartedAt, s.CompletedAt))
	default:
		fmt.Fprintf(&b, " · started %s · %s so far", d.date(s.StartedAt), span(s.StartedAt, d.o.Now))
	}
	fmt.Fprintf(&b, " · concurrency %d", d.v.Concurrency)
	if !s.StartedAt.IsZero() && !d.ended() {
		fmt.Fprintf(&b, ", %d running", d.v.Running)
	}
	var where []string
	if d.v.Repo != "" {
		where = append(where, "repo "+d.v.Repo)
	}
	if s.FeatureBranch != "" {
		where = append(where, "branch "+s.FeatureBranch)
	}
	if d.v.StatusFile != "" {
		where = append(where, "status file "+d.v.StatusFile)
	}
	if len(where) > 0 {
		b.WriteString("\n" + strings.Join(where, " · "))
	}
	return b.String()
}

// progress: the bar of tasks done or skipped, then what the rest are
// doing and what the run has cost.
func (d *drawing) progress() string {
	counts := map[runstatus.TaskState]int{}
	var cost float64
	for _, t := range d.tasks {
		counts[t.Status]++
		cost += t.CostUSD
	}
	total := len(d.tasks)
	finished := counts[runstatus.TaskDone] + counts[runstatus.TaskSkipped]
	pct := 0
	if total > 0 {
		pct = finished * 100 / total
	}
	line := fmt.Sprintf("%s %3d%% · %d/%d done", Bar(finished, total, d.o.Color), pct, finished, total)
	if n := counts[runstatus.TaskSkipped]; n > 0 {
		line += fmt.Sprintf(" (%d skipped)", n)
	}
	var rest []string
	for _, st := range stateOrder(counts) {
		if st == runstatus.TaskDone || st == runstatus.TaskSkipped {
			continue
		}
		rest = append(rest, fmt.Sprintf("%d %s", counts[st], d.paintTask(st)))
	}
	if len(rest) > 0 {
		line += " · " + strings.Join(rest, ", ")
	}
	line += fmt.Sprintf(" · $%.2f", max(cost, d.v.SpentUSD))
	if b := d.v.Budget; b != nil {
		line += fmt.Sprintf(" of a $%.2f budget (%s)", b.LimitUSD, b.Action)
	}
	if d.v.BudgetNote != "" {
		line += "\n" + d.v.BudgetNote
	}
	return line
}

// table: one row per task in run file order. A big run shows the tasks
// that need a look first, then as many others as fit, and says what it
// left out between them.
func (d *drawing) table() string {
	shown := d.rowsToShow()
	header := []string{"TASK", "STATUS", "MODEL", "LOOPS", "ATTEMPT", "COST", "TIME", "NOTE"}
	rows := [][]string{header}
	kinds := []rowKind{rowHeader}
	hidden := map[runstatus.TaskState]int{}
	flush := func() {
		if len(hidden) == 0 {
			return
		}
		n, text := countStates(hidden)
		rows = append(rows, []string{fmt.Sprintf("... %d more: %s", n, text)})
		kinds = append(kinds, rowGap)
		hidden = map[runstatus.TaskState]int{}
	}
	for i, t := range d.tasks {
		if !shown[i] {
			hidden[t.Status]++
			continue
		}
		flush()
		rows = append(rows, d.row(t))
		kinds = append(kinds, rowTask)
	}
	flush()

	widths := make([]int, len(header))
	for i, r := range rows {
		if kinds[i] == rowGap {
			continue
		}
		for c, cell := range r {
			widths[c] = max(widths[c], width(cell))
		}
	}
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteString("\n")
		}
		if kinds[i] == rowGap {
			b.WriteString(r[0])
			continue
		}
		var line strings.Builder
		for c, cell := range r {
			text := cell
			if c == 1 && kinds[i] == rowTask {
				text = d.paintTask(runstatus.TaskState(cell))
			}
			line.WriteString(text)
			if c < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[c]-width(cell)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
	}
	return b.String()
}

type rowKind int

const (
	rowHeader rowKind = iota
	rowTask
	rowGap
)

// rowsToShow picks at most MaxRows tasks for a run too big to show
// whole: first the tasks that need a look, then those ready to start, then
// the latest to end, then the rest, each group in file order (the latest
// by when they ended).
func (d *drawing) rowsToShow() map[int]bool {
	order := make([]int, len(d.tasks))
	for i := range order {
		order[i] = i
	}
	group := func(t task) int {
		switch {
		case needsALook(t.Status):
			return 0
		case t.Status == runstatus.TaskQueued && len(d.waitingOn(t)) == 0:
			return 1
		case t.Status == runstatus.TaskDone || t.Status == runstatus.TaskSkipped:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ta, tb := d.tasks[a], d.tasks[b]
		if ga, gb := group(ta), group(tb); ga != gb {
			return ga - gb
		} else if ga == 2 {
			return d.endOf(tb).Compare(d.endOf(ta))
		}
		return 0
	})
	shown := map[int]bool{}
	for _, i := range order[:min(len(order), MaxRows)] {
		shown[i] = true
	}
	return shown
}

// endOf is when a task last ended, zero when it never did.
func (d *drawing) endOf(t task) time.Time {
	return firstSet(t.CompletedAt, t.FailedAt, t.PausedAt)
}

// needsALook: a task that is at work or waits for a person.
func needsALook(st runstatus.TaskState) bool {
	switch st {
	case runstatus.TaskQueued, runstatus.TaskBlocked, runstatus.TaskDone, runstatus.TaskSkipped:
		return false
	}
	return true
}

func (d *drawing) row(t task) []string {
	started := !t.StartedAt.IsZero()
	model := t.Model
	if t.ModelUpgrades > 0 {
		model = runplan.ModelSonnet + "->" + t.Model
	}
	loops, attempt, cost := "-", "-", "-"
	if started || t.LoopCount > 0 {
		loops = fmt.Sprint(t.LoopCount)
	}
	if t.Attempt > 0 {
		attempt = fmt.Sprint(t.Attempt)
	}
	if started || t.CostUSD > 0 {
		cost = fmt.Sprintf("$%.2f", t.CostUSD)
	}
	return []string{t.ID, string(t.Status), orDash(model), loops, attempt, cost, d.times(t), d.note(t)}
}

// times: when the task started and when it ended, or "now" while it runs.
func (d *drawing) times(t task) string {
	if t.StartedAt.IsZero() {
		return "-"
	}
	var end time.Time
	switch t.Status {
	case runstatus.TaskRunning:
		return fmt.Sprintf("%s->now %s", d.clock(t.StartedAt), span(t.StartedAt, d.o.Now))
	case runstatus.TaskDone:
		end = t.CompletedAt
	case runstatus.TaskFailed:
		end = t.FailedAt
	case runstatus.TaskPaused:
		end = t.PausedAt
	case runstatus.TaskNeedsHumanRebase:
		// Its work ended when it completed; the conflict came with the
		// merge after.
		end = firstSet(t.CompletedAt, t.ConflictAt)
	case runstatus.TaskQueued, runstatus.TaskBlocked:
		// Queued again (a retry, a model upgrade): the last start says
		// nothing about the attempt to come.
		return "-"
	default:
		end = firstSet(t.CompletedAt, t.FailedAt, t.ConflictAt, t.PausedAt)
	}
	if end.IsZero() {
		return d.clock(t.StartedAt) + "->"
	}
	return fmt.Sprintf("%s->%s %s", d.clock(t.StartedAt), d.clock(end), span(t.StartedAt, end))
}

// note: the one thing to know about a task in its state.
func (d *drawing) note(t task) string {
	switch t.Status {
	case runstatus.TaskQueued:
		if waits := d.waitingOn(t); len(waits) > 0 {
			return "waits for " + names(waits)
		}
	case runstatus.TaskBlocked:
		return "blocked by " + names(t.BlockedBy)
	case runstatus.TaskFailed:
		return clip(orText(t.Error, t.LastError))
	case runstatus.TaskPaused:
		return "paused: " + string(t.PausedReason)
	case runstatus.TaskNeedsHumanRebase:
		return "conflicts: " + names(t.ConflictFiles)
	case runstatus.TaskRunning:
		if t.LastError != "" {
			return clip("last error: " + t.LastError)
		}
	case runstatus.TaskDone:
		switch {
		case t.PRNumber > 0 && !t.MergedAt.IsZero():
			return fmt.Sprintf("PR #%d merged", t.PRNumber)
		case t.PRNumber > 0:
			return fmt.Sprintf("PR #%d", t.PRNumber)
		}
	}
	return ""
}

// waitingOn lists a task's dependencies that are neither done nor
// skipped.
func (d *drawing) waitingOn(t task) []string {
	var ids []string
	for _, dep := range t.Depends {
		if i, ok := d.index[dep]; ok {
			if st := d.tasks[i].Status; st == runstatus.TaskDone || st == runstatus.TaskSkipped {
				continue
			}
		}
		ids = append(ids, dep)
	}
	return ids
}

// graph: the dependency graph by level, each task with an arrow to the
// tasks that wait for it; a big run as counts per level.
func (d *drawing) graph() string {
	levels := d.levels()
	if len(d.tasks) > MaxGraphTasks {
		return d.graphCounts(levels)
	}
	var b strings.Builder
	b.WriteString("dependencies (by level; a task -> the tasks that wait for it):")
	idWidth := 0
	for _, t := range d.tasks {
		idWidth = max(idWidth, width(t.ID))
	}
	numWidth := len(fmt.Sprint(len(levels)))
	used := map[string]bool{}
	for n, level := range levels {
		for j, id := range level {
			t := d.tasks[d.index[id]]
			num := ""
			if j == 0 {
				num = fmt.Sprint(n + 1)
			}
			m := marker(t.Status)
			used[m] = true
			line := fmt.Sprintf("  %*s  %s %s", numWidth, num, d.paintMarker(m, t.Status), id)
			if deps := d.dependents[id]; len(deps) > 0 {
				line += strings.Repeat(" ", idWidth-width(id)) + " -> " + names(deps)
			}
			b.WriteString("\n" + line)
		}
	}
	var legend []string
	for _, m := range markers {
		if used[m.mark] {
			legend = append(legend, m.mark+" "+m.meaning)
		}
	}
	b.WriteString("\n  " + strings.Join(legend, "  "))
	return b.String()
}

// graphCounts draws a big run's graph as one line per level: how many
// tasks it holds and their states.
func (d *drawing) graphCounts(levels [][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dependencies (%d tasks in %d levels; each level waits for the ones above it):", len(d.tasks), len(levels))
	numWidth := len(fmt.Sprint(len(levels)))
	for n, level := range levels {
		if n == MaxGraphLevels {
			rest := 0
			for _, l := range levels[n:] {
				rest += len(l)
			}
			fmt.Fprintf(&b, "\n  ... %d more levels, %d tasks", len(levels)-n, rest)
			break
		}
		counts := map[runstatus.TaskState]int{}
		for _, id := range level {
			counts[d.tasks[d.index[id]].Status]++
		}
		_, text := countStates(counts)
		fmt.Fprintf(&b, "\n  level %*d  %s: %s", numWidth, n+1, plural(len(level), "task"), text)
	}
	return b.String()
}

// levels orders the tasks as the run starts them: by dependency level,
// each level in file order. Tasks no level holds (a cycle, which a run file
// cannot have) come last, so every task is drawn.
func (d *drawing) levels() [][]string {
	run := runplan.Run{Tasks: make([]runplan.Task, len(d.tasks))}
	for i, t := range d.tasks {
		run.Tasks[i] = runplan.Task{ID: t.ID, Depends: t.Depends}
	}
	levels := run.Order()
	placed := 0
	for _, l := range levels {
		placed += len(l)
	}
	if placed < len(d.tasks) {
		in := map[string]bool{}
		for _, l := range levels {
			for _, id := range l {
				in[id] = true
			}
		}
		var rest []string
		for _, t := range d.tasks {
			if !in[t.ID] {
				rest = append(rest, t.ID)
			}
		}
		levels = append(levels, rest)
	}
	return levels
}

// warnings: what a person should know: an abort, tasks that loop, tasks
// paused, conflicts, paths changed by more than one task.
func (d *drawing) warnings() string {
	var lines []string
	if d.v.AbortReason != "" {
		lines = append(lines, "run aborted: "+d.v.AbortReason)
	}
	var looping, paused, rebase, stalled []string
	for _, t := range d.tasks {
		switch t.Status {
		case runstatus.TaskRunning:
			if !t.StalledAt.IsZero() {
				stalled = append(stalled, fmt.Sprintf("%s stalled in phase %s: no event and no agent output since %s",
					t.ID, orText(t.StalledPhase, "(none yet)"), d.clock(t.StalledAt)))
			}
			if t.LoopCount > 0 {
				w := fmt.Sprintf("%s has used %d of %d loops on %s", t.ID, t.LoopCount, loopLimit(t.Task), t.Model)
				if t.LastError != "" {
					w += "; last error: " + clip(t.LastError)
				}
				looping = append(looping, w)
			}
		case runstatus.TaskPaused:
			w := fmt.Sprintf("%s paused (%s)", t.ID, orText(string(t.PausedReason), "no reason given"))
			if !t.PausedAt.IsZero() {
				w += " at " + d.clock(t.PausedAt)
			}
			w += fmt.Sprintf(" after %s on %s", plural(t.LoopCount, "loop"), t.Model)
			if t.PausedReason == runstatus.PausedStall {
				w += ": it stalled and waits for a person"
			}
			paused = append(paused, w)
		case runstatus.TaskNeedsHumanRebase:
			w := t.ID + " needs a human rebase"
			if len(t.ConflictFiles) > 0 {
				w += ": conflicts in " + names(t.ConflictFiles)
			}
			if t.Worktree != "" {
				w += " (worktree " + t.Worktree + ")"
			}
			rebase = append(rebase, w)
		}
	}
	var overlaps []string
	for _, o := range d.v.Overlaps {
		overlaps = append(overlaps, o.Path+" changed by "+names(o.Tasks))
	}
	lines = append(lines, bounded(stalled, "stalled tasks")...)
	lines = append(lines, bounded(looping, "looping tasks")...)
	lines = append(lines, bounded(paused, "paused tasks")...)
	lines = append(lines, bounded(rebase, "tasks in conflict")...)
	lines = append(lines, bounded(overlaps, "paths changed by several tasks")...)
	if len(lines) == 0 {
		return ""
	}
	return d.paintHeading("warnings:", ansiYellow) + "\n  " + strings.Join(lines, "\n  ")
}

// blockers: while the run goes on, each failed or paused task with what
// waits for it and the commands that retry or skip it, and the command
// that resumes a paused run.
func (d *drawing) blockers() string {
	var entries []string
	var more []string
	for _, t := range d.tasks {
		var head, waits string
		switch t.Status {
		case runstatus.TaskFailed:
			head = t.ID + " " + d.paintTask(t.Status)
			if msg := orText(t.Error, t.LastError); msg != "" {
				head += ": " + clip(msg)
			}
			if blocked := d.blockedBy(t.ID); len(blocked) > 0 {
				waits = "blocks " + names(blocked)
			}
		case runstatus.TaskPaused:
			head = fmt.Sprintf("%s %s (%s)", t.ID, d.paintTask(t.Status), orText(string(t.PausedReason), "no reason given"))
			if deps := d.downstream(t.ID); len(deps) > 0 {
				waits = "holds up " + names(deps)
			}
		case runstatus.TaskNeedsHumanRebase:
			head = fmt.Sprintf("%s %s: rebase %s onto %s, then retry to merge it again", t.ID, d.paintTask(t.Status),
				orText(t.Branch, "its branch"), orText(d.v.Status.FeatureBranch, "the feature branch"))
			if deps := d.downstream(t.ID); len(deps) > 0 {
				waits = "holds up " + names(deps)
			}
		default:
			continue
		}
		if len(entries) == MaxListed {
			more = append(more, t.ID)
			continue
		}
		e := "  " + head
		if waits != "" {
			e += "\n    " + waits
		}
		e += "\n    retry: " + RetryCommand(d.v.Slug, t.ID)
		e += "\n    skip:  " + SkipCommand(d.v.Slug, t.ID)
		entries = append(entries, e)
	}
	if len(more) > 0 {
		entries = append(entries, fmt.Sprintf("  ... %d more failed or paused: %s", len(more), names(more)))
	}
	if len(entries) > 0 && d.ended() {
		entries = append(entries, "  the run has ended: a retry or skip reopens it where it ended")
	}
	if d.v.Status.Status == runstatus.RunPaused {
		entries = append(entries, "  the run is paused: no task starts until it resumes\n    resume: "+ResumeCommand(d.v.Slug))
	}
	if len(entries) == 0 {
		return ""
	}
	return d.paintHeading("blockers:", ansiRed) + "\n" + strings.Join(entries, "\n")
}

// RetryCommand, SkipCommand and ResumeCommand are the starter's command
// lines the view offers.
func RetryCommand(slug, taskID string) string { return "starter run retry " + slug + " " + taskID }

// SkipCommand: see RetryCommand.
func SkipCommand(slug, taskID string) string { return "starter run skip " + slug + " " + taskID }

// ResumeCommand: see RetryCommand.
func ResumeCommand(slug string) string { return "starter run resume " + slug }

// blockedBy lists the blocked tasks that name id among their blockers.
func (d *drawing) blockedBy(id string) []string {
	var ids []string
	for _, t := range d.tasks {
		if t.Status == runstatus.TaskBlocked && slices.Contains(t.BlockedBy, id) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// downstream lists the tasks that wait for id, directly or through
// others, and have not started: a paused task blocks no one in the
// document, but they cannot start either.
func (d *drawing) downstream(id string) []string {
	seen := map[string]bool{}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, dep := range d.dependents[cur] {
			if !seen[dep] {
				seen[dep] = true
				queue = append(queue, dep)
			}
		}
	}
	var ids []string
	for _, t := range d.tasks {
		if seen[t.ID] && (t.Status == runstatus.TaskQueued || t.Status == runstatus.TaskBlocked) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// summary: how the run ended, from the document's summary.
func (d *drawing) summary() string {
	sum := d.v.Status.Summary
	if !d.ended() || sum == nil {
		return ""
	}
	var cost float64
	for _, t := range d.tasks {
		cost += t.CostUSD
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s after %s", d.paintHeading("summary:", ""), d.paintRun(d.v.Status.Status), plural(sum.DurationMinutes, "minute"))
	fmt.Fprintf(&b, "\n  %s: %d successful, %d failed", plural(sum.TotalTasks, "task"), sum.Successful, sum.Failed)
	if sum.Skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped", sum.Skipped)
	}
	fmt.Fprintf(&b, "\n  %s, %s, $%.2f", plural(sum.TotalLoops, "loop"), plural(sum.ModelUpgrades, "model upgrade"), cost)
	var open []string
	for _, t := range d.tasks {
		switch t.Status {
		case runstatus.TaskDone, runstatus.TaskSkipped:
		case runstatus.TaskBlocked:
			open = append(open, fmt.Sprintf("%s (blocked by %s)", t.ID, names(t.BlockedBy)))
		default:
			open = append(open, fmt.Sprintf("%s (%s)", t.ID, t.Status))
		}
	}
	if len(open) > 0 {
		if len(open) > MaxNames {
			open = append(open[:MaxNames], fmt.Sprintf("+%d more", len(open)-MaxNames))
		}
		b.WriteString("\n  not done: " + strings.Join(open, ", "))
	}
	return b.String()
}

func loopLimit(t *runstatus.Task) int {
	if t.ModelUpgrades > 0 {
		return runstatus.MaxLoops - runstatus.StallLoops
	}
	return runstatus.StallLoops
}

// bounded keeps at most MaxListed lines and says how many it left out.
func bounded(lines []string, what string) []string {
	if len(lines) <= MaxListed {
		return lines
	}
	return append(lines[:MaxListed:MaxListed], fmt.Sprintf("... %d more %s", len(lines)-MaxListed, what))
}

// names joins ids or paths, at most MaxNames of them.
func names(ids []string) string {
	if len(ids) <= MaxNames {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:MaxNames], ", ") + fmt.Sprintf(" +%d more", len(ids)-MaxNames)
}

// countStates sums counts and spells them out: "10 done, 2 queued".
func countStates(counts map[runstatus.TaskState]int) (int, string) {
	n := 0
	var parts []string
	for _, st := range stateOrder(counts) {
		n += counts[st]
		parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
	}
	return n, strings.Join(parts, ", ")
}

// knownStates is the order states are counted in: the way a task goes,
// then the states a person has to look at.
var knownStates = []runstatus.TaskState{
	runstatus.TaskDone, runstatus.TaskSkipped, runstatus.TaskRunning, runstatus.TaskQueued,
	runstatus.TaskBlocked, runstatus.TaskFailed, runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase,
	runstatus.TaskInReview, runstatus.TaskNeedsRevision, runstatus.TaskApproved, runstatus.TaskExcluded,
}

// stateOrder lists the states counts holds (count above 0): the known
// ones in their order, then any other by name.
func stateOrder(counts map[runstatus.TaskState]int) []runstatus.TaskState {
	var out, other []runstatus.TaskState
	for _, st := range knownStates {
		if counts[st] > 0 {
			out = append(out, st)
		}
	}
	for st, n := range counts {
		if n > 0 && !slices.Contains(knownStates, st) {
			other = append(other, st)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

// markers are the graph's one-character states, in legend order.
var markers = []struct{ mark, meaning string }{
	{"[+]", "done"}, {"[>]", "running"}, {"[ ]", "queued"}, {"[#]", "blocked"},
	{"[x]", "failed"}, {"[-]", "skipped"}, {"[!]", "needs a person"}, {"[?]", "other"},
}

func marker(st runstatus.TaskState) string {
	switch st {
	case runstatus.TaskDone:
		return "[+]"
	case runstatus.TaskRunning:
		return "[>]"
	case runstatus.TaskQueued:
		return "[ ]"
	case runstatus.TaskBlocked:
		return "[#]"
	case runstatus.TaskFailed:
		return "[x]"
	case runstatus.TaskSkipped:
		return "[-]"
	case runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase, runstatus.TaskNeedsRevision:
		return "[!]"
	}
	return "[?]"
}

const barWidth = 20

// Bar draws done out of total: "[######--------------]", on a terminal
// green blocks. The starter's task view draws its phases with it too.
func Bar(done, total int, color bool) string {
	filled := 0
	if total > 0 {
		filled = min(done, total) * barWidth / total
	}
	if color {
		return "▕" + ansiGreen + strings.Repeat("█", filled) + ansiReset + strings.Repeat("░", barWidth-filled) + "▏"
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled) + "]"
}

// span is the time from a to b as a person reads it: 42s, 4m10s, 1h05m.
func span(a, b time.Time) string {
	d := b.Sub(a).Truncate(time.Second)
	if d < 0 {
		d = 0
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

func (d *drawing) clock(t time.Time) string { return t.In(d.o.Location).Format("15:04:05") }

func (d *drawing) date(t time.Time) string {
	return t.In(d.o.Location).Format("2006-01-02 15:04:05 MST")
}

func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// clip keeps an error to one line of at most maxNote characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxNote {
		return string(r[:maxNote-3]) + "..."
	}
	return s
}

func width(s string) int { return len([]rune(s)) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func orDash(s string) string { return orText(s, "-") }

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

const (
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

func (d *drawing) paint(s, color string) string {
	if !d.o.Color || color == "" || s == "" {
		return s
	}
	return color + s + ansiReset
}

func (d *drawing) paintTask(st runstatus.TaskState) string {
	return d.paint(string(st), taskColor(st))
}

func (d *drawing) paintMarker(m string, st runstatus.TaskState) string {
	return d.paint(m, taskColor(st))
}

func taskColor(st runstatus.TaskState) string {
	switch st {
	case runstatus.TaskDone, runstatus.TaskSkipped:
		return ansiGreen
	case runstatus.TaskFailed, runstatus.TaskBlocked:
		return ansiRed
	case runstatus.TaskRunning, runstatus.TaskPaused, runstatus.TaskNeedsHumanRebase, runstatus.TaskNeedsRevision:
		return ansiYellow
	}
	return ""
}

func (d *drawing) paintRun(st runstatus.RunState) string {
	c := ""
	switch st {
	case runstatus.RunComplete:
		c = ansiGreen
	case runstatus.RunPartial:
		c = ansiRed
	case runstatus.RunActive, runstatus.RunPaused:
		c = ansiYellow
	}
	return d.paint(string(st), c)
}

func (d *drawing) paintHeading(s, color string) string {
	return d.paint(s, ansiBold+color)
}
