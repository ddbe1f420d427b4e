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

// AheadOf finds a sink's brief that goes on past ours, including once the
// sink's log is full and dropped our oldest entries; anything else is not.
func TestAheadOf(t *testing.T) {
	entry := func(i int) LogEntry {
		return LogEntry{Time: "t", Agent: "conductor", Action: "x", Detail: strings.Repeat("d", i%7) + string(rune('a'+i%26))}
	}
	state := func(n, limit int) BriefState {
		s := NewBriefState("T5", PlanSummary{Name: "p", PhaseIDs: []string{"a"}})
		s.LogLimit = limit
		for i := 0; i < n; i++ {
			s.appendLogEntry(entry(i))
		}
		return s
	}
	held := func(s BriefState) map[string]any {
		data, err := json.Marshal(s.Brief)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m))
		return m
	}
	ours := state(3, 5)
	cases := []struct {
		name string
		sink BriefState
		want bool
	}{
		{"ours exactly", state(3, 5), false},
		{"two more", state(5, 5), true},
		{"full, dropped our oldest", state(7, 5), true},
		{"older", state(2, 5), false},
		{"another plan", func() BriefState { s := state(5, 5); s.Brief.Plan.Name = "q"; return s }(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := AheadOf(held(c.sink), &ours)
			require.Equal(t, c.want, ok)
			if ok {
				require.Equal(t, c.sink.Brief.Log, b.Log)
			}
		})
	}
	require.False(t, func() bool { _, ok := AheadOf(nil, &ours); return ok }())
}
