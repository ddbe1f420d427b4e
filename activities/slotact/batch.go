package slotact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/workflows/slotflow/slotapi"
)

// batchTimeout bounds one acquire-many update. Each acquire waits only as
// long as its own activity may; this frees the batcher should the server
// never answer.
const batchTimeout = 30 * time.Second

// batcher gathers the acquires this worker makes for one pool into
// acquire-many updates. Temporal admits only 10 updates in flight per
// workflow and the client retries the rest with backoff, so 200 tasks
// asking at once, one update each, wait seconds for answers the pool
// gives in microseconds. Here at most one update per pool (and task
// queue) is under way from this worker: the first acquire for an idle pool
// waits the batch window for others, then goes with them; every acquire
// arriving while that update is under way goes in the next one, sent as
// soon as it returns. An update carries at most slotapi.MaxAcquireMany
// acquires.
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
	mu    sync.Mutex
	lines map[batchKey]*batchLine
}

type batchKey struct{ pool, queue string }

// batchLine is one pool's acquires waiting for an update.
type batchLine struct {
	pending []*batchAsk
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
		b.lines = map[batchKey]*batchLine{}
	}
	l, busy := b.lines[k]
	if !busy {
		l = &batchLine{}
		b.lines[k] = l
	}
	l.pending = append(l.pending, m)
	b.mu.Unlock()
	if !busy {
		go b.drain(a, k, l)
	}
	select {
	case <-m.done:
		return m.got, m.err
	case <-ctx.Done():
		return slotapi.ManyAnswer{}, ctx.Err()
	}
}

// drain sends a pool's batches, one at a time, until none waits.
func (b *batcher) drain(a *Activities, k batchKey, l *batchLine) {
	window := a.BatchWindow
	if window == 0 {
		window = DefaultBatchWindow
	}
	time.Sleep(window)
	for {
		b.mu.Lock()
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
		if len(batch) == 0 {
			delete(b.lines, k)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		send(a, k, batch)
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
	res, err := acquireMany(ctx, a.Temporal, k, req)
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

func acquireMany(ctx context.Context, c SlotClient, k batchKey, req slotapi.AcquireMany) (slotapi.AcquireManyResult, error) {
	start := c.NewWithStartWorkflowOperation(slotapi.StartOptions(k.pool, k.queue),
		slotapi.PoolWorkflowName, slotapi.PoolInput{Pool: k.pool})
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID:   slotapi.WorkflowID(k.pool),
			UpdateID:     batchUpdateID(req),
			UpdateName:   slotapi.UpdateAcquireMany,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return slotapi.AcquireManyResult{}, fmt.Errorf("acquire %d slots in pool %s: %w", len(req.Requests), k.pool, err)
	}
	var res slotapi.AcquireManyResult
	if err := h.Get(ctx, &res); err != nil {
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
