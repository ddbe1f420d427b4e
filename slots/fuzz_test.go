package slots

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzPool applies random sequences of acquires, releases, limit changes,
// timeouts and lease expiries, and checks after each step what must always
// hold: the invariants of Check, no grant beyond max_concurrent or
// max_total, grants in arrival order, an acquire repeated at once answered
// the same, and a released key never held again.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3, 1, 1, 2, 5, 0, 4, 3, 0, 1, 2})
	f.Add([]byte{2, 1, 0, 0, 0, 1, 0, 2, 0, 3, 2, 4, 1, 0, 1, 1, 1, 2})
	f.Add([]byte{5, 3, 0, 9, 0, 10, 0, 11, 6, 0, 4, 0, 0, 12, 1, 9})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 1, 0, 7, 2, 0, 0})
	tasks := []string{"a", "b", "c", "d", "e", "f"}
	runs := []string{"", "r1", "r2"}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := New(Limits{MaxConcurrent: 2})
		p.Lease = 5 * time.Minute
		p.Fair = len(data)%2 == 1
		released := map[Key]bool{}
		now := t0
		for i := 0; i+1 < len(data); i += 2 {
			op, arg := data[i]%8, int(data[i+1])
			now = now.Add(time.Duration(arg%90) * time.Second)
			k := Key{Task: tasks[arg%len(tasks)], Attempt: 1 + arg/len(tasks)%2}
			r := Request{Key: k, Run: runs[arg/3%len(runs)], NoWait: arg%11 == 0, Timeout: time.Duration(arg%4) * time.Minute}
			limitBefore := p.Limits
			heldBefore := len(p.Holders)
			order := waitOrder(&p)
			var notices []Notice
			switch op {
			case 0, 1:
				a := p.Acquire(r, now)
				if again := p.Acquire(r, now); again != a {
					t.Fatalf("step %d: acquire %s answered %+v, then %+v", i, k, a, again)
				}
				if a.State == Granted && released[k] {
					t.Fatalf("step %d: released key %s granted again", i, k)
				}
				if a.State == Granted && len(p.Holders) > heldBefore && heldBefore >= limitBefore.MaxConcurrent {
					t.Fatalf("step %d: granted %s with %d of %d held", i, k, heldBefore, limitBefore.MaxConcurrent)
				}
			case 2:
				var gone Gone
				gone, notices = p.Release(k, now)
				if gone == GoneHolder || gone == GoneUnknown {
					released[k] = true
				}
			case 3:
				notices, _ = p.SetLimits(Limits{MaxConcurrent: arg%5 + 1, MaxTotal: arg % 4}, now)
			case 4:
				notices = p.ExpireWaiters(now)
			case 5:
				var dropped []Key
				dropped, notices = p.ExpireLeases(now)
				for _, d := range dropped {
					released[d] = true
				}
			case 6:
				p.Renew([]Key{k}, now)
			case 7:
				data, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				p = Pool{}
				if err := json.Unmarshal(data, &p); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Check(); err != nil {
				t.Fatalf("step %d (op %d, %s): %v", i, op, k, err)
			}
			if len(p.Holders) > max(heldBefore, p.Limits.MaxConcurrent) {
				t.Fatalf("step %d: %d holders, limit %d, %d before", i, len(p.Holders), p.Limits.MaxConcurrent, heldBefore)
			}
			checkNotices(t, i, notices, order, released)
			for _, n := range notices {
				if n.Answer.State == Granted && p.Limits.MaxTotal > 0 {
					h := p.Holders[len(p.Holders)-1]
					if g := p.Granted(h.Run, h.Key); g > p.Limits.MaxTotal {
						t.Fatalf("step %d: %s granted beyond max_total: %d of %d", i, n.Key, g, p.Limits.MaxTotal)
					}
				}
			}
		}
	})
}

// waitOrder is each waiter's place in the line the pool predicts.
func waitOrder(p *Pool) map[Key]int {
	m := map[Key]int{}
	for i, w := range p.Line() {
		m[w.Key] = i
	}
	return m
}

// checkNotices: grants go to waiters in the order the line said (arrival
// order, or turns in a fair line), and never to a released key.
func checkNotices(t *testing.T, step int, ns []Notice, order map[Key]int, released map[Key]bool) {
	t.Helper()
	last := -1
	for _, n := range ns {
		pos, ok := order[n.Key]
		if !ok {
			t.Fatalf("step %d: notice for %s, which was not waiting", step, n.Key)
		}
		if n.Answer.State == Granted {
			if released[n.Key] {
				t.Fatalf("step %d: released key %s granted", step, n.Key)
			}
			if pos < last {
				t.Fatalf("step %d: %s granted out of line order", step, n.Key)
			}
			last = pos
		}
	}
}
