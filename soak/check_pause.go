package soak

import (
	"fmt"
	"sort"
	"time"
)

// pauseEpisode is one pause of a task as the samples saw it: from its
// first sample to its last, and the first sample after it (end) that shows
// the task no longer in it, nil while it lasted to the soak's end.
type pauseEpisode struct {
	task        string
	pause       Pause // as last seen
	attempt     int
	first, last time.Time
	untils      []time.Time
	end         *point
}

// pauseEpisodes cuts each task's timeline into its pauses. A pause is
// known by its reason and its start: a new reason or a new start is a new
// pause, whatever the count says.
func pauseEpisodes(o *Observed) []pauseEpisode {
	tls := timelines(o)
	tasks := make([]string, 0, len(tls))
	for t := range tls {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	var out []pauseEpisode
	for _, task := range tasks {
		var cur *pauseEpisode
		for i := range tls[task] {
			p := &tls[task][i]
			pa := p.S.Pause
			if cur != nil && pa != nil && pa.Reason == cur.pause.Reason && pa.Since.Equal(cur.pause.Since) {
				cur.pause, cur.last = *pa, p.At
				cur.untils = append(cur.untils, pa.Until)
				continue
			}
			if cur != nil {
				cur.end = p
				out = append(out, *cur)
				cur = nil
			}
			if pa != nil {
				cur = &pauseEpisode{task: task, pause: *pa, attempt: p.S.Attempt, first: p.At, last: p.At,
					untils: []time.Time{pa.Until}}
			}
		}
		if cur != nil {
			out = append(out, *cur)
		}
	}
	return out
}

// endedUnder reports whether a pause ended because the task ended or
// moved to another attempt (an abort, a cancel, a redispatch, the pause
// cap): that is no resume, and the pause rules do not judge it. A task
// seen finishing (its outcome known, its status being written) is ending.
func (e pauseEpisode) endedUnder() bool {
	if e.end == nil {
		return true
	}
	s := e.end.S
	return !s.Open || s.Stage == "done" || s.Stage == "finish" || (s.Attempt != 0 && e.attempt != 0 && s.Attempt != e.attempt)
}

// resumedBy is the latest the task can have resumed: when the sample after
// the pause was taken, or when the next pause began if one follows.
func (e pauseEpisode) resumedBy() time.Time {
	t := e.end.At
	if np := e.end.S.Pause; np != nil && np.Since.After(e.last) && np.Since.Before(t) {
		t = np.Since
	}
	return t
}

func (e pauseEpisode) describe() string {
	d := fmt.Sprintf("%s pause since %s", e.pause.Reason, ts(e.pause.Since))
	if e.pause.Budget != "" {
		d += fmt.Sprintf(" (%s)", e.pause.Budget)
	}
	if !e.pause.ResetAt.IsZero() {
		d += ", reset " + ts(e.pause.ResetAt)
	}
	if !e.pause.Until.IsZero() {
		d += ", until " + ts(e.pause.Until)
	}
	if e.pause.Account != "" {
		d += ", account " + e.pause.Account
		if e.pause.By != "" {
			d += " (limit met by " + e.pause.By + ")"
		}
	}
	return d + fmt.Sprintf(", attempt %d, seen paused %s..%s", e.attempt, ts(e.first), ts(e.last))
}

// CheckUsageLimitPauses: a usage-limit pause ends at or after its reset,
// unless a person resumed the task (a resume in the journal while it was
// paused); and it is never scheduled to end (until) before its reset.
func CheckUsageLimitPauses(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, e := range pauseEpisodes(o) {
		if e.pause.Reason != PauseUsageLimit || e.pause.ResetAt.IsZero() {
			continue
		}
		reset := e.pause.ResetAt
		for _, u := range e.untils {
			if !u.IsZero() && u.Before(reset.Add(-c.Slack)) {
				out = append(out, violation(InvUsageLimitPauseUntilReset, e.task, e.first,
					"%s: scheduled to resume at %s, %s before its reset", e.describe(), ts(u), reset.Sub(u).Round(time.Millisecond)))
				break
			}
		}
		if e.endedUnder() {
			continue
		}
		by := e.resumedBy()
		if !by.Before(reset.Add(-c.Slack)) {
			continue
		}
		from, to := e.pause.Since.Add(-c.Slack), by.Add(c.Slack)
		// A person's resume ends a pause; so does a person's redispatch or
		// abort, which gives the pause's attempt up for another (the
		// status query may name the new attempt before its first sample).
		if journalHas(o, e.task, taskRun(o, e.task), from, to, RecResume, RecRedispatch, RecAbort) != nil || accountResumed(o, e, from, to) {
			continue
		}
		out = append(out, violation(InvUsageLimitPauseUntilReset, e.task, by,
			"%s: over by %s, %s before its reset, and no person resumed it; at %s the workflow was %s",
			e.describe(), ts(by), reset.Sub(by).Round(time.Millisecond), ts(e.end.At), describe(e.end.S)))
	}
	return out
}

// CheckBudgetPauses: a budget pause has no end of its own: it ends only
// when the task's budget is raised or a person resumes it (both in the
// journal while it was paused), never on a timer and never by turning
// into another pause.
func CheckBudgetPauses(o *Observed, c Config) []Violation {
	c = c.withDefaults()
	var out []Violation
	for _, e := range pauseEpisodes(o) {
		if e.pause.Reason != PauseBudget {
			continue
		}
		for _, u := range e.untils {
			if !u.IsZero() {
				out = append(out, violation(InvBudgetPauseUntilRaised, e.task, e.first,
					"%s: became a timed pause, to resume at %s", e.describe(), ts(u)))
				break
			}
		}
		if e.endedUnder() {
			continue
		}
		if r := journalHas(o, e.task, taskRun(o, e.task), e.pause.Since.Add(-c.Slack), e.end.At.Add(c.Slack),
			RecBudgetRaise, RecResume); r != nil {
			continue
		}
		out = append(out, violation(InvBudgetPauseUntilRaised, e.task, e.resumedBy(),
			"%s: over by %s with no budget raised and no resume in the journal; at %s the workflow was %s",
			e.describe(), ts(e.resumedBy()), ts(e.end.At), describe(e.end.S)))
	}
	return out
}

// accountResumed reports whether a person resumed the account the task's
// pause is on (a journal resume naming the account, not a task) within
// [from, to]: that ends every member's usage-limit pause. It never ends a
// budget pause.
func accountResumed(o *Observed, e pauseEpisode, from, to time.Time) bool {
	accounts := map[string]bool{}
	if e.pause.Account != "" {
		accounts[e.pause.Account] = true
	}
	for _, r := range o.Journal {
		if r.Kind == RecTaskStart && r.Task == e.task && r.Detail("account") != "" {
			accounts[r.Detail("account")] = true
		}
	}
	for _, r := range o.Journal {
		if r.Kind == RecResume && r.Task == "" && accounts[r.Detail("account")] && !r.At.Before(from) && !r.At.After(to) {
			return true
		}
	}
	return false
}
