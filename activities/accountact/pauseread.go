package accountact

import (
	"context"
	"sync"
	"time"

	"karvi-edda-temporal/workflows/accountflow/accountapi"
)

// pauseFresh is how long a read of an account's pause answers the joins
// of this worker that come after it.
//
// Every task of a queue joins its worker's account as it starts, so at a
// thousand tasks started within a minute the account's workflow took a
// describe of its own from every one of them, beside their join signals;
// on a busy server 1,834 of 2,000 such reads outlasted the join's 10 s and
// those tasks went on without their account. A read shared for a moment
// is as safe as one of its own: the join signal still goes first, and an
// account that paused after the read tells each member that joins from
// then on that it is paused (accountapi.SignalJoin), as it does for a
// pause that comes between a join's own read and its signal.
const pauseFresh = time.Second

// pauseReads shares the reads of accounts' pauses: a join takes the last
// read of its account if it is fresh, waits for the one under way if any,
// or reads itself.
type pauseReads struct {
	mu       sync.Mutex
	accounts map[string]*pauseRead
}

type pauseRead struct {
	done   chan struct{} // closed once the read under way ends
	at     time.Time     // when the last good read began
	v      accountapi.View
	inMemo bool
	ok     bool
}

// read answers with a fresh read of account's pause; do reads it.
func (p *pauseReads) read(ctx context.Context, account string, do func(context.Context) (accountapi.View, bool, error)) (accountapi.View, bool, error) {
	for {
		p.mu.Lock()
		if p.accounts == nil {
			p.accounts = map[string]*pauseRead{}
		}
		r := p.accounts[account]
		if r != nil && r.ok && time.Since(r.at) < pauseFresh {
			v, inMemo := r.v, r.inMemo
			p.mu.Unlock()
			return v, inMemo, nil
		}
		if r != nil && r.done != nil {
			done := r.done
			p.mu.Unlock()
			select {
			case <-done:
				continue // take its answer, or read once it failed
			case <-ctx.Done():
				return accountapi.View{}, false, ctx.Err()
			}
		}
		if r == nil {
			r = &pauseRead{}
			p.accounts[account] = r
		}
		r.done = make(chan struct{})
		done := r.done
		p.mu.Unlock()

		began := time.Now()
		v, inMemo, err := do(ctx)
		p.mu.Lock()
		r.done = nil
		if err == nil {
			r.at, r.v, r.inMemo, r.ok = began, v, inMemo, true
		}
		p.mu.Unlock()
		close(done)
		return v, inMemo, err
	}
}
