package slots

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func req(task string, attempt int) Request {
	return Request{Key: Key{Task: task, Attempt: attempt}, Owner: Owner{WorkflowID: "karvi-task-" + task, FirstRunID: "run-" + task}}
}

func inRun(r Request, run string) Request { r.Run = run; return r }

func waiting(r Request, timeout time.Duration) Request { r.Timeout = timeout; return r }

func keys[T Holder | Waiter](xs []T) []string {
	var out []string
	for _, x := range xs {
		switch v := any(x).(type) {
		case Holder:
			out = append(out, v.Key.Task)
		case Waiter:
			out = append(out, v.Key.Task)
		}
	}
	return out
}

func granted(n ...Notice) []string {
	var out []string
	for _, x := range n {
		out = append(out, fmt.Sprintf("%s %s%s", x.Key.Task, x.Answer.State, x.Answer.Reason))
	}
	return out
}

func TestAcquire(t *testing.T) {
	cases := []struct {
		name  string
		pool  Pool
		setup []Request
		req   Request
		want  Answer
		// holders and waiters after
		holders, waiters []string
	}{
		{name: "free slot granted", pool: New(Limits{MaxConcurrent: 2}),
			req: req("a", 1), want: Answer{State: Granted, Since: at(9)}, holders: []string{"a"}},
		{name: "full pool queues", pool: New(Limits{MaxConcurrent: 1}), setup: []Request{req("a", 1)},
			req: req("b", 1), want: Answer{State: Queued, Position: 1, Since: at(9)}, holders: []string{"a"}, waiters: []string{"b"}},
		{name: "no wait refuses max_concurrent", pool: New(Limits{MaxConcurrent: 1}), setup: []Request{req("a", 1)},
			req:  Request{Key: Key{Task: "b", Attempt: 1}, NoWait: true},
			want: Answer{State: Refused, Reason: ReasonMaxConcurrent, Detail: "all 1 slots are held"}, holders: []string{"a"}},
		{name: "no wait with room is granted", pool: New(Limits{MaxConcurrent: 2}), setup: []Request{req("a", 1)},
			req: Request{Key: Key{Task: "b", Attempt: 1}, NoWait: true}, want: Answer{State: Granted, Since: at(9)}, holders: []string{"a", "b"}},
		{name: "max_total per run", pool: New(Limits{MaxConcurrent: 9, MaxTotal: 2}),
			setup:   []Request{inRun(req("a", 1), "r1"), inRun(req("b", 1), "r1"), inRun(req("c", 1), "r2")},
			req:     inRun(req("d", 1), "r1"),
			want:    Answer{State: Refused, Reason: ReasonMaxTotal, Detail: "run r1 was granted 2 slots, max_total is 2"},
			holders: []string{"a", "b", "c"}},
		{name: "max_total of a task on its own counts its attempts", pool: New(Limits{MaxConcurrent: 9, MaxTotal: 1}),
			setup: []Request{req("a", 1)}, req: req("a", 2),
			want:    Answer{State: Refused, Reason: ReasonMaxTotal, Detail: "task a was granted 1 slots, max_total is 1"},
			holders: []string{"a"}},
		{name: "same key held: same grant", pool: New(Limits{MaxConcurrent: 1}), setup: []Request{req("a", 1)},
			req: req("a", 1), want: Answer{State: Granted, Since: at(0)}, holders: []string{"a"}},
		{name: "same key waiting: its place", pool: New(Limits{MaxConcurrent: 1}), setup: []Request{req("a", 1), req("b", 1), req("c", 1)},
			req: req("b", 1), want: Answer{State: Queued, Position: 1, Since: at(1)}, holders: []string{"a"}, waiters: []string{"b", "c"}},
		{name: "another attempt is another key", pool: New(Limits{MaxConcurrent: 1}), setup: []Request{req("a", 1)},
			req: req("a", 2), want: Answer{State: Queued, Position: 1, Since: at(9)}, holders: []string{"a"}, waiters: []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.pool
			for i, r := range c.setup {
				p.Acquire(r, at(i))
			}
			got := p.Acquire(c.req, at(9))
			require.Equal(t, c.want, got)
			require.Equal(t, c.holders, keys(p.Holders))
			require.Equal(t, c.waiters, keys(p.Waiters))
			require.NoError(t, p.Check())
			require.Equal(t, got, p.Acquire(c.req, at(10)), "a second acquire of the same key gets the same answer")
		})
	}
}

func TestReleaseGrantsInArrivalOrder(t *testing.T) {
	p := New(Limits{MaxConcurrent: 2})
	for i, task := range []string{"a", "b", "c", "d", "e"} {
		p.Acquire(req(task, 1), at(i))
	}
	require.Equal(t, []string{"a", "b"}, keys(p.Holders))
	require.Equal(t, []string{"c", "d", "e"}, keys(p.Waiters))

	gone, n := p.Release(Key{Task: "b", Attempt: 1}, at(10))
	require.Equal(t, GoneHolder, gone)
	require.Equal(t, []string{"c granted"}, granted(n...))
	require.Equal(t, Owner{WorkflowID: "karvi-task-c", FirstRunID: "run-c"}, n[0].Owner)
	require.Equal(t, at(10), n[0].Answer.Since)

	gone, n = p.Release(Key{Task: "b", Attempt: 1}, at(11))
	require.Equal(t, GoneSettled, gone, "release is idempotent")
	require.Empty(t, n)
	require.Equal(t, []string{"a", "c"}, keys(p.Holders))

	// A waiter that gives up leaves the line; it frees no slot.
	gone, n = p.Release(Key{Task: "d", Attempt: 1}, at(12))
	require.Equal(t, GoneWaiter, gone)
	require.Empty(t, n)
	require.Equal(t, []string{"e"}, keys(p.Waiters))
	require.Equal(t, Answer{State: Refused, Reason: ReasonCancelled, Detail: "the request was withdrawn"}, p.Acquire(req("d", 1), at(13)))

	_, n = p.Release(Key{Task: "a", Attempt: 1}, at(14))
	require.Equal(t, []string{"e granted"}, granted(n...))
	require.Empty(t, p.Waiters)
	require.Equal(t, Stats{Granted: 4, Queued: 3, Released: 2, Cancelled: 1}, p.Stats)
	require.NoError(t, p.Check())
}

func TestAReleasedKeyIsNeverGrantedAgain(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1})
	p.Acquire(req("a", 1), at(0))
	p.Release(Key{Task: "a", Attempt: 1}, at(1))
	require.Equal(t, Answer{State: Released}, p.Acquire(req("a", 1), at(2)), "a late repeat of a released request")
	require.Empty(t, p.Holders)

	// A release that overtook its own request: the request, when it comes,
	// takes nothing.
	gone, _ := p.Release(Key{Task: "b", Attempt: 1}, at(3))
	require.Equal(t, GoneUnknown, gone)
	require.Equal(t, Answer{State: Released}, p.Acquire(req("b", 1), at(4)))
	require.Empty(t, p.Holders)
	require.Equal(t, Answer{State: Granted, Since: at(5)}, p.Acquire(req("b", 2), at(5)), "the next attempt asks anew")
}

func TestMaxTotalRefusesAWaiterWhenItsTurnComes(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1, MaxTotal: 2})
	p.Acquire(inRun(req("a", 1), "r"), at(0))
	p.Acquire(inRun(req("b", 1), "r"), at(1)) // queued: r has 1 grant
	p.Acquire(inRun(req("c", 1), "r"), at(2)) // queued: r has 1 grant
	p.Acquire(inRun(req("x", 1), "other"), at(3))
	_, n := p.Release(Key{Task: "a", Attempt: 1}, at(4))
	require.Equal(t, []string{"b granted"}, granted(n...))
	_, n = p.Release(Key{Task: "b", Attempt: 1}, at(5))
	require.Equal(t, []string{"c refusedmax_total", "x granted"}, granted(n...))
	require.Equal(t, "run r was granted 2 slots, max_total is 2", n[0].Answer.Detail)
	require.Equal(t, 2, p.Granted("r", Key{}))
	require.Equal(t, map[Reason]int{ReasonMaxTotal: 1}, p.Stats.Refused)
}

func TestSetLimitsTakesEffectAtOnce(t *testing.T) {
	p := New(Limits{MaxConcurrent: 2})
	for i, task := range []string{"a", "b", "c", "d", "e", "f"} {
		p.Acquire(req(task, 1), at(i))
	}
	n, err := p.SetLimits(Limits{MaxConcurrent: 4}, at(10))
	require.NoError(t, err)
	require.Equal(t, []string{"c granted", "d granted"}, granted(n...), "raising grants waiters at once, in order")

	n, err = p.SetLimits(Limits{MaxConcurrent: 1}, at(11))
	require.NoError(t, err)
	require.Empty(t, n)
	require.Equal(t, []string{"a", "b", "c", "d"}, keys(p.Holders), "lowering takes no slot back")
	for _, k := range []string{"a", "b", "c"} {
		_, n = p.Release(Key{Task: k, Attempt: 1}, at(12))
		require.Empty(t, n, "nothing is granted while the holders are at or over the new limit")
	}
	_, n = p.Release(Key{Task: "d", Attempt: 1}, at(13))
	require.Equal(t, []string{"e granted"}, granted(n...))
	require.NoError(t, p.Check())

	_, err = p.SetLimits(Limits{MaxConcurrent: 0, MaxTotal: -1}, at(14))
	require.EqualError(t, err, "max_concurrent 0 must be between 1 and 10000\nmax_total -1 must be between 0 (no limit) and 1000000")
	require.Equal(t, 1, p.Limits.MaxConcurrent, "refused limits change nothing")
}

func TestWaitersTimeOut(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1})
	p.Acquire(req("a", 1), at(0))
	p.Acquire(waiting(req("b", 1), 30*time.Second), at(1))
	p.Acquire(req("c", 1), at(2))
	p.Acquire(waiting(req("d", 1), 10*time.Second), at(3))
	require.Equal(t, at(13), p.NextDeadline())
	require.Empty(t, p.ExpireWaiters(at(12)))

	n := p.ExpireWaiters(at(13))
	require.Equal(t, []string{"d refusedtimeout"}, granted(n...))
	require.Equal(t, "waited 10s in line", n[0].Answer.Detail)
	require.Equal(t, at(31), p.NextDeadline())
	require.Equal(t, []string{"b", "c"}, keys(p.Waiters))
	require.Equal(t, n[0].Answer, p.Acquire(waiting(req("d", 1), 10*time.Second), at(14)), "a refusal is answered again")

	_, n = p.Release(Key{Task: "a", Attempt: 1}, at(20))
	require.Equal(t, []string{"b granted"}, granted(n...))
	require.True(t, p.NextDeadline().IsZero(), "c waits as long as it takes")
}

func TestLeases(t *testing.T) {
	p := New(Limits{MaxConcurrent: 2})
	p.Lease = time.Minute
	p.Acquire(req("a", 1), at(0))
	p.Acquire(req("b", 1), at(0))
	p.Acquire(req("c", 1), at(0))
	require.Equal(t, at(60), p.Holders[0].LeaseUntil)

	p.Renew([]Key{{Task: "a", Attempt: 1}, {Task: "zz", Attempt: 1}}, at(50))
	dropped, n := p.ExpireLeases(at(60))
	require.Empty(t, dropped, "a lease lasts to its end")
	require.Empty(t, n)
	dropped, n = p.ExpireLeases(at(61))
	require.Equal(t, []Key{{Task: "b", Attempt: 1}}, dropped)
	require.Equal(t, []string{"c granted"}, granted(n...))
	require.Equal(t, []string{"a", "c"}, keys(p.Holders))
	require.Equal(t, Answer{State: Released, Detail: "lease expired"}, p.Acquire(req("b", 1), at(62)))
	require.Equal(t, 1, p.Stats.Expired)

	q := New(Limits{MaxConcurrent: 1})
	q.Acquire(req("a", 1), at(0))
	dropped, _ = q.ExpireLeases(at(1e6))
	require.Empty(t, dropped, "without a lease a holder keeps its slot")
}

func TestPoolRoundTripsThroughJSON(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1, MaxTotal: 5})
	p.Lease = time.Minute
	p.Acquire(inRun(req("a", 1), "r"), at(0))
	p.Acquire(waiting(req("b", 1), time.Minute), at(1))
	p.Acquire(Request{Key: Key{Task: "c", Attempt: 1}, NoWait: true}, at(2))
	p.Release(Key{Task: "zz", Attempt: 3}, at(3))
	data, err := json.Marshal(p)
	require.NoError(t, err)
	var back Pool
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, p, back)
}

func TestValidation(t *testing.T) {
	require.NoError(t, req("T-5", 1).Validate())
	require.EqualError(t, Request{Key: Key{Task: "", Attempt: 0}, Timeout: -1}.Validate(),
		"key: task is required\nkey: attempt 0 must be at least 1\ntimeout -1ns must not be negative")
	for _, ok := range []string{"agents", "a", "gpu_pool-2", "A1"} {
		require.NoError(t, ValidPoolName(ok), ok)
	}
	for _, bad := range []string{"", "-x", "_x", "a b", "a/b", string(make([]byte, 65))} {
		require.Error(t, ValidPoolName(bad), bad)
	}
}

func TestSettledAndRunsStayBounded(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1, MaxTotal: 1})
	for i := range SettledKeep + 10 {
		r := inRun(req(fmt.Sprint("t", i), 1), fmt.Sprint("r", i))
		p.Acquire(r, at(i))
		p.Release(r.Key, at(i))
	}
	require.Len(t, p.Settled, SettledKeep)
	require.Len(t, p.Runs, RunsKeep)
	require.Equal(t, "r10", p.Runs[0].Run, "the least recently granted runs are forgotten")
}
