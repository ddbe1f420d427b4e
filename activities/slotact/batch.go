package slotact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"karvi-edda-temporal/api/slot"
)

// batchTimeout bounds one acquire-many update. Each acquire waits only as
// long as its own activity may; this frees the batcher should the server
// never answer.
const batchTimeout = 30 * time.Second

// batcher gathers the acquires this worker makes for one pool into
// acquire-many updates. Temporal admits only 10 updates in flight per
// workflow and the client retries the rest with backoff, so 200 tasks
// asking at once, one update each, wait seconds for answers the pool
// gives in microseconds. Here the first acquire for a pool with nothing
// waiting waits the batch window for others, then goes with them; at most
// Activities.BatchesInFlight updates per pool (and task queue) are under
// way from this worker, and the acquires arriving while that many are go
// together in the next one, sent as soon as one returns. An update carries
// at most slotapi.MaxAcquireMany acquires. The server hands the pool the
// updates under way together in one workflow task, so a few in flight
// cost it little more than one.
//
// Failure: an update that fails fails every acquire in it, and each then
// asks again alone (Activities.acquire). An acquire whose activity ends
// (cancelled, timed out) before its batch is sent is left out of it; one
// that ends while its batch is under way may be granted a slot it never
// hears of, as a single update cut short may: its task's workflow asks
// again for the same key when the activity is retried and is answered the
// same grant, gives the key back when its attempt ends however it ends,
// and a workflow that is gone loses the slot at the pool's next look at its
// holders.
type batcher struct {
	mu sync.Mutex
	// freed is signalled when an update returns.
	freed *sync.Cond
	lines map[batchKey]*batchLine
}

type batchKey struct{ pool, queue string }

// batchLine is one pool's acquires waiting for an update, and the updates
// under way.
type batchLine struct {
	pending  []*batchAsk
	draining bool
	inFlight int
}

// batchAsk is one acquire in a batch; done is closed once got or err is
// set.
type batchAsk struct {
	ctx  context.Context
	req  AcquireSlotRequest
	done chan struct{}
	got  slotapi.ManyAnswer
	err  error
}

// ask puts an acquire in its pool's next batch and waits for its answer,
// or for ctx to end.
func (b *batcher) ask(ctx context.Context, a *Activities, queue string, req AcquireSlotRequest) (slotapi.ManyAnswer, error) {
	m := &batchAsk{ctx: ctx, req: req, done: make(chan struct{})}
	k := batchKey{pool: req.Pool, queue: queue}
	b.mu.Lock()
	if b.lines == nil {
		b.lines, b.freed = map[batchKey]*batchLine{}, sync.NewCond(&b.mu)
	}
	l := b.lines[k]
	if l == nil {
		l = &batchLine{}
		b.lines[k] = l
	}
	l.pending = append(l.pending, m)
	start := !l.draining
	l.draining = true
	b.mu.Unlock()
	if start {
		go b.drain(a, k, l)
	}
	select {
	case <-m.done:
		return m.got, m.err
	case <-ctx.Done():
		return slotapi.ManyAnswer{}, ctx.Err()
	}
}

// drain sends a pool's waiting acquires in batches, no more than
// BatchesInFlight under way at once, until none waits.
func (b *batcher) drain(a *Activities, k batchKey, l *batchLine) {
	window := a.BatchWindow
	if window == 0 {
		window = DefaultBatchWindow
	}
	most := a.BatchesInFlight
	if most <= 0 {
		most = DefaultBatchesInFlight
	}
	time.Sleep(window)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for l.inFlight >= most {
			b.freed.Wait()
		}
		batch := l.take()
		if len(batch) == 0 {
			l.draining = false
			b.forget(k, l)
			return
		}
		l.inFlight++
		go func() {
			send(a, k, batch)
			b.mu.Lock()
			defer b.mu.Unlock()
			l.inFlight--
			b.forget(k, l)
			b.freed.Broadcast()
		}()
	}
}

// take removes the next batch from the line: the acquires still asking,
// at most slotapi.MaxAcquireMany.
func (l *batchLine) take() []*batchAsk {
	var batch []*batchAsk
	rest := l.pending[:0]
	for _, m := range l.pending {
		switch {
		case m.ctx.Err() != nil:
			// Its activity ended; it is not asked for.
		case len(batch) < slotapi.MaxAcquireMany:
			batch = append(batch, m)
		default:
			rest = append(rest, m)
		}
	}
	clear(l.pending[len(rest):])
	l.pending = rest
	return batch
}

// forget drops a line nothing uses any more. b.mu is held.
func (b *batcher) forget(k batchKey, l *batchLine) {
	if !l.draining && l.inFlight == 0 && len(l.pending) == 0 && b.lines[k] == l {
		delete(b.lines, k)
	}
}

// send asks for a batch in one acquire-many update and hands each acquire
// its own answer, or the update's error.
func send(a *Activities, k batchKey, batch []*batchAsk) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	req := slotapi.AcquireMany{}
	for _, m := range batch {
		req.Requests = append(req.Requests, m.req.Request)
	}
	res, err := acquireMany(ctx, a.Temporal, k, a.poolInput(k.pool), req)
	if err == nil && len(res.Answers) != len(batch) {
		err = fmt.Errorf("acquire-many to pool %s answered %d of %d requests", k.pool, len(res.Answers), len(batch))
	}
	for i, m := range batch {
		if err != nil {
			m.err = err
		} else {
			m.got = res.Answers[i]
		}
		close(m.done)
	}
}

func acquireMany(ctx context.Context, c SlotClient, k batchKey, in slotapi.PoolInput, req slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
	res, err := slotapi.Pools{Client: c, TaskQueue: k.queue}.AcquireMany(ctx, in, batchUpdateID(req), req)
	if err != nil {
		return slotapi.AcquireManyResult{}, fmt.Errorf("acquire %d slots in pool %s: %w", len(req.Requests), k.pool, err)
	}
	return res, nil
}

// batchUpdateID is unique per batch: the server answers a repeated update
// id from its first outcome, and no two batches hold the same acquires.
// (Each acquire is idempotent at the pool by its key, so a batch asked
// again under a fresh id is answered the same.)
func batchUpdateID(req slotapi.AcquireMany) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("acquire-many/%s/%d/%s", req.Requests[0].Key.UpdateID(), len(req.Requests), hex.EncodeToString(b[:]))
}
