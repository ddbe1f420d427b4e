package karvi

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// BoardMaxAge is how old a shared board snapshot may be for GetTask. karvi
// has no per-task read: every status change would otherwise read the whole
// board. Concurrent readers share one read (singleflight), and readers within
// BoardMaxAge of it share its result; the client's own status writes update
// the snapshot from karvi's answer, so it never shows a task behind what this
// process wrote. Someone else's change (a person, karvi's review) can be
// missed for up to this long: a write planned on it is refused as an illegal
// transition, and the caller reads again with GetTaskFresh.
const BoardMaxAge = 2 * time.Second

// boardCache is the shared snapshot of karvi's task list.
type boardCache struct {
	group singleflight.Group
	reads atomic.Int64

	mu    sync.Mutex
	at    time.Time // when the snapshot's read was sent
	tasks map[string]entry
}

type entry struct {
	task Task
	asOf time.Time // when the read or write that produced it was sent
}

// lookup returns the task from a snapshot younger than BoardMaxAge.
// known=false means the snapshot cannot answer (too old, or the task was
// not in it); found=false with known=true does not happen: a task absent
// from the snapshot is read again, since it may have been created since.
func (b *boardCache) lookup(id string, now time.Time) (Task, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tasks == nil || now.Sub(b.at) > BoardMaxAge {
		return Task{}, false
	}
	e, ok := b.tasks[id]
	return e.task, ok
}

// store keeps a list read sent at sentAt; an entry a later write of this
// process produced is kept over the read's older view.
func (b *boardCache) store(tasks []Task, sentAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sentAt.Before(b.at) {
		return // a newer read already landed
	}
	next := make(map[string]entry, len(tasks))
	for _, t := range tasks {
		next[t.ID] = entry{task: t, asOf: sentAt}
	}
	for id, e := range b.tasks {
		if e.asOf.After(sentAt) {
			if _, listed := next[id]; listed {
				next[id] = e
			}
		}
	}
	b.tasks, b.at = next, sentAt
}

// wrote records a task as karvi answered a write of it (sent at sentAt);
// without an answer the entry is dropped, so the next lookup reads.
func (b *boardCache) wrote(id string, answer json.RawMessage, sentAt time.Time) {
	var a struct {
		Task *Task `json:"task"`
	}
	ok := json.Unmarshal(answer, &a) == nil && a.Task != nil && a.Task.ID == id
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tasks == nil {
		return
	}
	if ok {
		b.tasks[id] = entry{task: *a.Task, asOf: sentAt}
		return
	}
	delete(b.tasks, id)
}

// known returns the task as this process last saw it, at any age, and
// when that view was taken.
func (b *boardCache) known(id string) (Task, time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.tasks[id]
	return e.task, e.asOf, ok
}

// forget drops a task from the snapshot (karvi said it is gone, or a write
// to it failed in a way that may mean the snapshot is wrong).
func (b *boardCache) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.tasks, id)
}

// TaskView returns the task as this process last saw it (from a board read
// or its own last write to it), however old, and fresh=false; or, when it
// has not seen it, GetTask's answer and fresh=true. It is for planning a
// write whose refusal (an illegal transition, a task not found) is the cue
// to read again with GetTaskFresh: it costs no request for a task whose
// status only this process changes.
func (c *Client) TaskView(ctx context.Context, taskID string) (Task, bool, error) {
	if t, at, ok := c.gate.board.known(taskID); ok {
		return t, time.Since(at) <= BoardMaxAge, nil
	}
	t, err := c.GetTask(ctx, taskID)
	return t, err == nil, err
}

// sharedList reads the task list once for every concurrent caller.
func (c *Client) sharedList(ctx context.Context, op string) ([]Task, error) {
	b := &c.gate.board
	ch := b.group.DoChan("tasks", func() (any, error) {
		sentAt := time.Now()
		// The read is shared: one caller's cancellation must not fail the
		// others, so it runs on its own context with the client's timeout.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultTimeout)
		defer cancel()
		b.reads.Add(1)
		tasks, err := c.listTasks(rctx, op)
		if err != nil {
			return nil, err
		}
		b.store(tasks, sentAt)
		return tasks, nil
	})
	select {
	case <-ctx.Done():
		return nil, &Error{Op: op, Kind: KindTransient, Message: "reading the task list: " + ctx.Err().Error(), Err: ctx.Err()}
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]Task), nil
	}
}
