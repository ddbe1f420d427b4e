package jobview

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// maxFailuresShown bounds the failed checks listed under each attempt.
const maxFailuresShown = 5

// Report is the job for a person: first the latest attempt's verdict in one
// line ("3 passed, 1 failed, 4 total in 27ms"), then where the job stands,
// each attempt with its failed checks, and the time, cost and tries of each
// step, the cost by model and the tokens.
func Report(j Job) string {
	var b strings.Builder
	last := Verdict{}
	if n := len(j.Attempts); n > 0 {
		last = j.Attempts[n-1].Verdict
	}
	b.WriteString(last.Summary() + "\n")
	fmt.Fprintf(&b, "job %s %s · %s · $%.2f · %s\n", j.ID, stateWords(j.State),
		formatDuration(j.Metrics.TotalTime.Std()), j.Metrics.Cost.TotalUSD, plural(j.Metrics.RetryCount, "retry", "retries"))
	for _, a := range j.Attempts {
		fmt.Fprintf(&b, "attempt %d %s: %s · %s\n", a.Number, a.ID, resultWords(a.Result), a.Verdict.Summary())
		shown := 0
		for _, r := range a.Verdict.TestResults {
			if r.Status != TestFailed && r.Status != TestError {
				continue
			}
			if shown == maxFailuresShown {
				b.WriteString("  …\n")
				break
			}
			shown++
			line := "  " + r.Status + " " + r.Name
			if r.Output != nil {
				line += ": " + clip(oneLine(*r.Output), 160)
			}
			b.WriteString(line + "\n")
		}
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\ttime\tcost\ttries")
	for _, s := range j.Metrics.StepMetrics {
		if s.Tries == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t0\n", s.StepID)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t$%.2f\t%d\n", s.StepID, formatDuration(s.Duration.Std()), s.CostUSD, s.Tries)
	}
	tw.Flush()
	var costs []string
	for _, m := range slices.Sorted(maps.Keys(j.Metrics.Cost.ByModel)) {
		costs = append(costs, fmt.Sprintf("%s $%.2f", m, j.Metrics.Cost.ByModel[m]))
	}
	if len(costs) == 0 {
		costs = []string{"nothing reported"}
	}
	b.WriteString("cost by model: " + strings.Join(costs, ", ") + "\n")
	var tokens []string
	for _, u := range j.Metrics.TokenUsage {
		tokens = append(tokens, fmt.Sprintf("%s %d in / %d out", u.Model, u.InputTokens, u.OutputTokens))
	}
	if len(tokens) == 0 {
		tokens = []string{"not reported"}
	}
	b.WriteString("tokens: " + strings.Join(tokens, ", ") + "\n")
	return b.String()
}

func stateWords(s RunState) string {
	switch s.Status {
	case StateExecuting:
		return fmt.Sprintf("executing %s (attempt %d)", s.Step, s.Attempt)
	case StateVerifying:
		return fmt.Sprintf("verifying (attempt %d)", s.Attempt)
	case StateSucceeded:
		return fmt.Sprintf("succeeded at attempt %d", s.Attempt)
	case StateFailed:
		return fmt.Sprintf("failed at attempt %d: %s", s.Attempts, clip(oneLine(s.LastError), 200))
	}
	return s.Status
}

func resultWords(r AttemptResult) string {
	switch r.Status {
	case ResultInProgress:
		return "in progress"
	case ResultVerificationFailed:
		return "verification failed"
	case ResultExecutionFailed:
		if r.Step == "" {
			return "execution failed: " + clip(oneLine(r.Error), 200)
		}
		return fmt.Sprintf("execution failed in %s: %s", r.Step, clip(oneLine(r.Error), 200))
	}
	return r.Status
}

// formatDuration rounds to what a person reads: 850ms, 12.3s, 1m59s.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
