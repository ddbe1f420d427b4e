package jobview

import (
	"time"

	"karvi-edda-temporal/mapping"
)

// JobInput is what the workflow knows of a task, besides the tallies.
type JobInput struct {
	// ID is the task id; SpecID the dispatch's planId; PlanID the latest
	// attempt's plan name.
	ID, SpecID, PlanID string
	MaxAttempts        int
	// Model is the dispatch's modelHint, "" for none.
	Model string
	// CreatedAt is when the first attempt began; UpdatedAt when the
	// workflow last learned something.
	CreatedAt, UpdatedAt time.Time
	Attempts             []AttemptInput
}

// AttemptInput is one attempt as the workflow knows it.
type AttemptInput struct {
	Number int
	// ID is the attempt's plan name ("" before its plan was written).
	ID string
	// StartedAt is when the workflow began it; FinishedAt when it ended
	// (zero while it runs).
	StartedAt, FinishedAt time.Time
	// Planning: its plan is not yet written or its conductor not started.
	Planning bool
	// Tally is what its events said; its End, how it ended (nil while it
	// runs). A nil Tally is an attempt nothing was heard from.
	Tally *Tally
}

// BuildJob is the job view of a task.
func BuildJob(in JobInput) Job {
	j := Job{
		ID: in.ID, SpecID: in.SpecID, PlanID: in.PlanID, MaxAttempts: in.MaxAttempts,
		Attempts:  make([]Attempt, 0, len(in.Attempts)),
		Config:    JobConfig{Optimize: OptimizeBalanced},
		CreatedAt: in.CreatedAt.UTC(), UpdatedAt: in.UpdatedAt.UTC(),
	}
	if in.Model != "" {
		m := in.Model
		j.Config.ExecutorModel = &m
	}
	for _, a := range in.Attempts {
		j.Attempts = append(j.Attempts, attemptView(in.ID, a))
	}
	j.State = runState(in.Attempts)
	j.Metrics = jobMetrics(in)
	return j
}

func attemptView(jobID string, a AttemptInput) Attempt {
	t := a.Tally
	if t == nil {
		t = &Tally{}
	}
	v := t.Verdict(t.End != nil && t.End.How == EndCompleted)
	at := Attempt{ID: a.ID, JobID: jobID, Number: a.Number, WorktreePath: t.Worktree,
		StartedAt: a.StartedAt.UTC(), Verdict: v}
	if !a.FinishedAt.IsZero() {
		f := a.FinishedAt.UTC()
		at.FinishedAt = &f
	}
	at.Result = result(t, v)
	return at
}

// result is how the attempt ended: blocked by a check is a verification
// failure; blocked otherwise, aborted or redispatched midway is an
// execution failure in the phase it stopped in.
func result(t *Tally, v Verdict) AttemptResult {
	e := t.End
	switch {
	case e == nil:
		return AttemptResult{Status: ResultInProgress}
	case e.How == EndCompleted:
		return AttemptResult{Status: ResultSucceeded}
	case e.How == EndBlocked && e.ErrorType == mapping.ErrCheckFailed:
		return AttemptResult{Status: ResultVerificationFailed, Verdict: &v}
	}
	step := e.Phase
	if step == "" {
		step = t.Current
	}
	msg := e.Error
	if msg == "" {
		switch e.How {
		case EndRedispatched:
			msg = "Redispatched before the attempt finished"
		case EndAborted:
			msg = mapping.MsgUserAbort
		}
	}
	return AttemptResult{Status: ResultExecutionFailed, Step: step, Error: msg}
}

// runState is where the latest attempt stands.
func runState(attempts []AttemptInput) RunState {
	if len(attempts) == 0 {
		return Pending()
	}
	last := attempts[len(attempts)-1]
	t := last.Tally
	if t == nil {
		t = &Tally{}
	}
	if e := t.End; e != nil {
		switch e.How {
		case EndCompleted:
			return Succeeded(last.Number, "")
		case EndAborted:
			return Cancelled()
		case EndRedispatched:
			return Planning() // the next attempt is on its way
		}
		return Failed(last.Number, e.Error)
	}
	switch {
	case last.Planning || t.Current == "":
		return Planning()
	case t.Verifying:
		return Verifying(last.Number)
	}
	return Executing(last.Number, t.Current)
}

// jobMetrics sums the attempts' metrics: the job's time runs from its
// first attempt's start to its last one's end (or to the latest news);
// every redispatch counts as a retry.
func jobMetrics(in JobInput) Metrics {
	m := Metrics{JobID: in.ID, StepMetrics: []StepMetrics{}}
	end := in.UpdatedAt
	if n := len(in.Attempts); n > 0 && !in.Attempts[n-1].FinishedAt.IsZero() {
		end = in.Attempts[n-1].FinishedAt
	}
	m.TotalTime = DurationOf(end.Sub(in.CreatedAt))
	var costs []ModelCost
	for _, a := range in.Attempts {
		if a.Tally == nil {
			continue
		}
		am := a.Tally.Metrics(in.ID, in.Model)
		for _, u := range am.TokenUsage {
			m.TokenUsage = mergeUsage(m.TokenUsage, u)
		}
		for _, c := range a.Tally.modelCosts(in.Model) {
			costs = mergeCost(costs, c)
		}
		for _, s := range am.StepMetrics {
			m.StepMetrics = mergeStep(m.StepMetrics, s)
		}
		m.RetryCount += am.RetryCount
	}
	m.RetryCount += max(len(in.Attempts)-1, 0)
	m.setCosts(costs)
	return m
}

// modelOf is the first model named, else UnknownModel.
func modelOf(names ...string) string {
	for _, n := range names {
		if n != "" {
			return n
		}
	}
	return UnknownModel
}

func mergeStep(list []StepMetrics, s StepMetrics) []StepMetrics {
	for i := range list {
		if list[i].StepID != s.StepID {
			continue
		}
		l := &list[i]
		l.Duration = DurationOf(l.Duration.Std() + s.Duration.Std())
		l.CostUSD = roundMicros(l.CostUSD + s.CostUSD)
		l.Tries += s.Tries
		if s.Tokens != nil {
			if l.Tokens == nil {
				tok := *s.Tokens
				l.Tokens = &tok
			} else {
				if l.Tokens.Model != s.Tokens.Model {
					l.Tokens.Model = "mixed"
				}
				l.Tokens.InputTokens += s.Tokens.InputTokens
				l.Tokens.OutputTokens += s.Tokens.OutputTokens
			}
		}
		return list
	}
	return append(list, s)
}
