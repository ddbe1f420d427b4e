package taskapi

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"karvi-edda-temporal/mapping"
)

const (
	// SummaryRunes bounds a summary: the Web UI shows it on one line.
	SummaryRunes = 120
	detailsRunes = 2000 // the message, in the static details
)

// StartSummary is the one-line summary and the details a task's workflow is
// started with: the task id and the first line of its message, then the
// dispatch's particulars and the message itself.
func StartSummary(d mapping.DispatchPlan, attempt int) (summary, details string) {
	attempt = max(attempt, 1)
	first, _, _ := strings.Cut(strings.TrimSpace(d.Message), "\n")
	summary = d.TaskID + ": " + Cut(strings.TrimSpace(first), SummaryRunes)
	if attempt > 1 {
		summary = fmt.Sprintf("%s (attempt %d)", summary, attempt)
	}
	var b strings.Builder
	b.WriteString(fmt.Sprintf("karvi task **%s**", d.TaskID))
	if d.PlanID != "" {
		b.WriteString(fmt.Sprintf(" · dispatch `%s`", d.PlanID))
	}
	b.WriteString(fmt.Sprintf(" · attempt %d", attempt))
	if d.Skill != "" {
		b.WriteString(fmt.Sprintf(" · skill `%s`", d.Skill))
	}
	b.WriteString("\n\n")
	b.WriteString(Cut(strings.TrimSpace(d.Message), detailsRunes))
	return summary, b.String()
}

// Cut shortens s to at most n runes, marking the cut.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ClipLine folds s onto one line and cuts it to n bytes, marking the cut.
func ClipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return strings.TrimSpace(s[:n]) + "…"
}
