package jobview

import "karvi-edda-temporal/mapping"

// addTokens folds v into u, keeping u's model; a count stops at
// mapping.MaxTokens.
func addTokens(u *mapping.Usage, v mapping.Usage) {
	u.InputTokens = min(u.InputTokens+v.InputTokens, mapping.MaxTokens)
	u.OutputTokens = min(u.OutputTokens+v.OutputTokens, mapping.MaxTokens)
}
