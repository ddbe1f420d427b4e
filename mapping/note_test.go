package mapping

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNoteAddsOneLogEntry(t *testing.T) {
	s := NewBriefState("T5", PlanSummary{Name: "karvi-t5", PhaseIDs: []string{"a"}})
	var enc BriefEncoder
	c := s.Note("2026-01-01T00:00:00Z", "budget", "Budget warning: $0.41 spent of $0.50 (82%)")
	require.Equal(t, PatchTypeNote, c.Type)
	require.Len(t, s.Brief.Log, 1)
	require.Equal(t, LogEntry{Time: "2026-01-01T00:00:00Z", Agent: SettleAgent, Action: "budget",
		Detail: "Budget warning: $0.41 spent of $0.50 (82%)"}, s.Brief.Log[0])
	var body map[string]any
	require.NoError(t, json.Unmarshal(enc.Patch(&s, c).Body, &body))
	require.Contains(t, body, "log")
	require.NotContains(t, body, "phases", "a note touches the log only")
}
