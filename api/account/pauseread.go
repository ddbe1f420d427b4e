package accountapi

import (
	"context"
	"sync"
	"time"
)

// pauseFresh is how long a read of an account's pause answers the joins
// of this worker that come after it.
//
// Every task of a queue joins its worker's account as it starts, so at a
// thousand tasks started within a minute the account's workflow took a
// describe of its own from every one of them, beside their join signals;
// on a busy server 1,834 of 2,000 such reads outlasted the join's 10 s and
// those tasks went on without their account.
//
// Only a read that finds the account not paused is shared, and that is as
// safe as a read of the join's own: the join signal goes first, and an
// account that paused after the read tells every member joining from then
// on that it is paused (SignalJoin), as it does for a pause
// that comes between a join's own read and its signal. A read that finds
// the account paused is not shared: nothing would tell the join of a
// resume that came after it, and the task would wait out the old pause.
const pauseFresh = time.Second

// pauseReads shares the reads of accounts' pauses: a join takes the last
// read of its account while it is fresh and finds no pause, waits for the
// read under way if any (and takes it on the same terms), or reads itself.
type pauseReads struct {
	mu       sync.Mutex
	accounts map[string]*pauseRead
}

type pauseRead struct {
	done   chan struct{} // closed once the read under way ends
	at     time.Time     // when the last good read began
	v      View
	inMemo bool
	ok     bool
}

type readPause func(context.Context) (View, bool, error)

// read answers with a read of account's pause that do made for this join
// or for one a moment before it.
func (p *pauseReads) read(ctx context.Context, account string, do readPause) (View, bool, error) {
	return p.readFresh(ctx, account, pauseFresh, do)
}

// readFresh is read with reads fresh for fresh: pauseFresh at the worker's
// time scale.
func (p *pauseReads) readFresh(ctx context.Context, account string, fresh time.Duration, do readPause) (View, bool, error) {
	p.mu.Lock()
	if p.accounts == nil {
		p.accounts = map[string]*pauseRead{}
	}
	r := p.accounts[account]
	if r == nil {
		r = &pauseRead{}
		p.accounts[account] = r
	}
	if v, inMemo, ok := r.shared(fresh); ok {
		p.mu.Unlock()
		return v, inMemo, nil
	}
	if done := r.done; done != nil {
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return View{}, false, ctx.Err()
		}
		p.mu.Lock()
		v, inMemo, ok := r.shared(fresh)
		p.mu.Unlock()
		if ok {
			return v, inMemo, nil
		}
		return p.readAndKeep(ctx, r, do, nil)
	}
	done := make(chan struct{})
	r.done = done
	p.mu.Unlock()
	return p.readAndKeep(ctx, r, do, done)
}

// shared is the last read when a join may take it: fresh, and finding the
// account not paused. Called with the lock held.
func (r *pauseRead) shared(fresh time.Duration) (View, bool, bool) {
	now := time.Now()
	if !r.ok || now.Sub(r.at) >= fresh || r.v.PausedUntil.After(now) {
		return View{}, false, false
	}
	return r.v, r.inMemo, true
}

// readAndKeep reads and keeps the answer for the joins after it; done, if
// this read is the one the others wait for, is closed once it is kept.
func (p *pauseReads) readAndKeep(ctx context.Context, r *pauseRead, do readPause, done chan struct{}) (View, bool, error) {
	began := time.Now()
	v, inMemo, err := do(ctx)
	p.mu.Lock()
	if err == nil && began.After(r.at) {
		r.at, r.v, r.inMemo, r.ok = began, v, inMemo, true
	}
	if done != nil {
		r.done = nil
	}
	p.mu.Unlock()
	if done != nil {
		close(done)
	}
	return v, inMemo, err
}
