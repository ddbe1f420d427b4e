package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Workflow history carries the brief in every delivery's input and
// result, and the server refuses a payload over 2 MB by ending the
// workflow. However many events an attempt writes, with whatever texts,
// the brief's encoding stays bounded: the log keeps DefaultLogLimit
// entries, and each entry's detail is cut to MaxLogDetailBytes.
func TestBriefStaysBoundedWhateverTheEvents(t *testing.T) {
	long := strings.Repeat("x", 10<<10) // 10 KB: cut to MaxTextBytes on parsing
	cases := []struct {
		name string
		ev   func(i int) Event
	}{
		{"phase_failed with a long check output", func(i int) Event {
			return Event{Type: EventPhaseFailed, PhaseID: "test", Attempt: i, Error: truncate(long, MaxTextBytes)}
		}},
		{"unknown type with error and reason", func(i int) Event {
			return Event{Type: "verdict_received", PhaseID: truncate(long, MaxTextBytes),
				Error: truncate(long, MaxTextBytes), Reason: truncate(long, MaxTextBytes)}
		}},
		{"phase_skipped with a long reason", func(i int) Event {
			return Event{Type: EventPhaseSkipped, PhaseID: "docs", Reason: truncate(long, MaxTextBytes)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewBriefState("T5", PlanSummary{Name: "p", PhaseIDs: []string{"implement", "test", "docs"}})
			for i := 1; i <= 5000; i++ {
				ev := c.ev(i)
				ev.Pos = Position{Offset: int64(i)}
				ev.TS = "2026-02-28T03:00:01Z"
				s.Reduce(ev)
			}
			data, err := json.Marshal(s)
			require.NoError(t, err)
			require.Len(t, s.Brief.Log, DefaultLogLimit)
			require.Less(t, len(data), 512<<10, "the brief's JSON is %d KB", len(data)>>10)
			for _, e := range s.Brief.Log {
				require.LessOrEqual(t, len(e.Detail), MaxLogDetailBytes)
			}
		})
	}
}
