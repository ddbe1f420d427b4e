package slots

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// In a fair line a small run that arrives behind a big one gets the next
// slot freed; then the parties take turns, the tasks outside any run as
// one more party, each party's own waiters in order of arrival.
func TestFairLineServesPartiesInTurn(t *testing.T) {
	for _, fair := range []bool{false, true} {
		p := New(Limits{MaxConcurrent: 1})
		p.Fair = fair
		now := t0
		ask := func(task, run string) Answer {
			now = now.Add(time.Second)
			return p.Acquire(Request{Key: Key{Task: task, Attempt: 1}, Run: run}, now)
		}
		ask("big-0", "big")
		for i := 1; i <= 5; i++ {
			ask(fmt.Sprintf("big-%d", i), "big")
		}
		small := ask("small-1", "small")
		ask("small-2", "small")
		ask("solo-1", "")
		if fair && small.Position != 1 {
			t.Fatalf("fair: the small run's first task is at position %d, want 1", small.Position)
		}
		line := taskNames(p.Line())
		var granted []string
		holder := "big-0"
		for len(p.Waiters) > 0 {
			now = now.Add(time.Second)
			_, notices := p.Release(Key{Task: holder, Attempt: 1}, now)
			if len(notices) != 1 || notices[0].Answer.State != Granted {
				t.Fatalf("fair=%v: release of %s gave %+v", fair, holder, notices)
			}
			holder = notices[0].Key.Task
			granted = append(granted, holder)
			if err := p.Check(); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"big-1", "big-2", "big-3", "big-4", "big-5", "small-1", "small-2", "solo-1"}
		if fair {
			want = []string{"small-1", "solo-1", "big-1", "small-2", "big-2", "big-3", "big-4", "big-5"}
		}
		if !slices.Equal(granted, want) {
			t.Errorf("fair=%v: granted %v, want %v", fair, granted, want)
		}
		if !slices.Equal(line, want) {
			t.Errorf("fair=%v: the line said %v, then granted %v", fair, line, granted)
		}
	}
}

// Parties never served go before one served already, in the order their
// first waiter came; a party that leaves the line (its waiters time out or
// give up) takes its turn with it.
func TestFairLinePartyThatLeavesGivesUpItsTurn(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1})
	p.Fair = true
	now := t0
	p.Acquire(Request{Key: Key{Task: "h", Attempt: 1}, Run: "a"}, now)
	for _, r := range []struct{ task, run string }{{"a1", "a"}, {"b1", "b"}, {"c1", "c"}, {"a2", "a"}} {
		now = now.Add(time.Second)
		p.Acquire(Request{Key: Key{Task: r.task, Attempt: 1}, Run: r.run}, now)
	}
	if got := taskNames(p.Line()); !slices.Equal(got, []string{"b1", "c1", "a1", "a2"}) {
		t.Fatalf("line %v", got)
	}
	p.Release(Key{Task: "b1", Attempt: 1}, now) // b gives up
	if got := taskNames(p.Line()); !slices.Equal(got, []string{"c1", "a1", "a2"}) {
		t.Fatalf("after b left: line %v", got)
	}
	_, notices := p.Release(Key{Task: "h", Attempt: 1}, now)
	if len(notices) != 1 || notices[0].Key.Task != "c1" {
		t.Fatalf("granted %+v, want c1", notices)
	}
}

// A pool kept before fair lines turns fair with its waiters in place: the
// parties take turns from then on, in order of their first waiter.
func TestPoolTurnsFairWithWaitersInLine(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1})
	now := t0
	for _, r := range []struct{ task, run string }{{"h", ""}, {"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		now = now.Add(time.Second)
		p.Acquire(Request{Key: Key{Task: r.task, Attempt: 1}, Run: r.run}, now)
	}
	p.Fair = true
	if got := taskNames(p.Line()); !slices.Equal(got, []string{"a1", "b1", "a2"}) {
		t.Fatalf("line %v", got)
	}
}

func taskNames(ws []Waiter) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Key.Task
	}
	return out
}
