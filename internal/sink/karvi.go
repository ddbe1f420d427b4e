package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	"karvi-edda-temporal/internal/jsonmerge"
	"karvi-edda-temporal/internal/karvi"
)

// Karvi sends briefs and statuses to a karvi server.
//
// What reaches karvi, and what cannot:
//   - task.status, through POST /api/tasks/:id/status, one legal step at a
//     time (karvi.PathTo); karvi sets task.blocker {reason, askedAt} on
//     blocked with a reason (askedAt is karvi's clock) and clears it on any
//     other status.
//   - task.blocker's reason, through /update, when the task was already
//     blocked with another reason.
//   - the dispatch outcome, when DispatchState is completed or failed, as
//     task.result = {summary, dispatch: {state, planId, planName,
//     lastError}} through /update (WithDispatchResult(false) turns it off);
//     a pause the same way (state paused, the summary saying why and until
//     when) while the status stays in_progress, and the resume (state
//     dispatching with a reason) replacing it. A blocker would not do for
//     a pause: /update cannot clear one, and karvi deletes blocked tasks
//     after six hours.
//   - task.dispatch itself is NOT written: karvi's /update ignores it, and
//     the only route that could (POST /api/board) replaces the whole task
//     plan, racing karvi's own writes. Nor is a non-terminal dispatch state
//     (dispatching) written anywhere.
//
// Side effects in karvi worth knowing: moving a task to dispatched makes
// karvi try its own auto-dispatch when its auto_dispatch control is on, and
// moving it to completed starts karvi's review when auto_review is on.
type Karvi struct {
	c              *karvi.Client
	now            func() time.Time
	dispatchResult bool

	// noBrief remembers, per task, when karvi last said it has no brief
	// (tasks made through karvi's API have none): for noBriefFor the
	// task's brief writes fail at once without asking karvi again.
	mu      sync.Mutex
	noBrief map[string]time.Time
}

// noBriefFor is how long a task karvi said has no brief is not asked
// again. A brief file made meanwhile is found after this.
const noBriefFor = 10 * time.Minute

// ErrAlreadyReported marks a refusal the sink already reported for this
// task (karvi has no brief for it): the caller need not log it again.
var ErrAlreadyReported = errors.New("already reported for this task")

// ErrTaskGone: karvi no longer has the task (deleted by a person, or by
// karvi itself: it removes cancelled tasks after an hour, blocked ones
// after six). There is nothing left to write to.
var ErrTaskGone = errors.New("the task no longer exists in karvi")

// ErrBoardCancelled: the task was cancelled on the board. karvi allows no
// status after cancelled, and a person's cancel stands over any status an
// attempt would write.
var ErrBoardCancelled = errors.New("the task was cancelled on the board")

// KarviOption configures NewKarvi.
type KarviOption func(*Karvi)

// WithDispatchResult chooses whether the terminal dispatch outcome is
// written to task.result (default true).
func WithDispatchResult(enabled bool) KarviOption {
	return func(k *Karvi) { k.dispatchResult = enabled }
}

// NewKarvi returns a sink writing through c.
func NewKarvi(c *karvi.Client, opts ...KarviOption) *Karvi {
	k := &Karvi{c: c, now: time.Now, dispatchResult: true, noBrief: map[string]time.Time{}}
	for _, o := range opts {
		o(k)
	}
	return k
}

// PatchBrief sends body as a PATCH of the task's brief. A task without a
// brief fails with karvi.IsNoBrief; for noBriefFor after karvi said so, at
// once and also with ErrAlreadyReported.
func (k *Karvi) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	if err := k.knownNoBrief(taskID); err != nil {
		return err
	}
	err := k.c.PatchBrief(ctx, taskID, body)
	if karvi.IsNoBrief(err) {
		k.mu.Lock()
		k.noBrief[taskID] = k.now()
		k.mu.Unlock()
	}
	return err
}

// CanReplace is true: karvi's PUT replaces a brief whole (Replacer).
func (k *Karvi) CanReplace() bool { return true }

// ReplaceBrief sends body as the task's whole brief (PUT). Unlike PATCH it
// creates the brief file of a task that has a briefPath but no file yet; a
// task without a brief fails as PatchBrief does.
func (k *Karvi) ReplaceBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	if err := k.knownNoBrief(taskID); err != nil {
		return err
	}
	err := k.c.PutBrief(ctx, taskID, body)
	if karvi.IsNoBrief(err) {
		k.mu.Lock()
		k.noBrief[taskID] = k.now()
		k.mu.Unlock()
	}
	return err
}

func (k *Karvi) knownNoBrief(taskID string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.noBrief[taskID]
	if !ok {
		return nil
	}
	if k.now().Sub(at) > noBriefFor {
		delete(k.noBrief, taskID)
		return nil
	}
	return fmt.Errorf("%w (%w)", &karvi.Error{Op: "PATCH /api/brief/" + taskID, Status: 404,
		Kind: karvi.KindNoBrief, Message: "no brief for this task"}, ErrAlreadyReported)
}

// Congested reports whether a brief write would now wait for its turn
// under karvi's rate limit; delivery merges the updates that wait.
func (k *Karvi) Congested() bool { return k.c.Congested() }

// Attend counts a task as running against karvi (sink.Attendance): with
// many running, brief writes merge sooner.
func (k *Karvi) Attend() (done func()) { return k.c.Attend() }

// CurrentBrief reads the task's brief from karvi; nil when karvi has none.
func (k *Karvi) CurrentBrief(ctx context.Context, taskID string) (map[string]any, error) {
	raw, err := k.c.GetBrief(ctx, taskID)
	if karvi.IsNoBrief(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("karvi sink read brief of %s: %w", taskID, err)
	}
	return b, nil
}

// replans bounds how often SetStatus re-reads the task after karvi refused
// a step because someone else moved the task meanwhile.
const replans = 3

// SetStatus moves the task to u.Status through legal transitions (a no-op
// when it is there already), then writes what /update can carry. A target
// karvi cannot reach from the current status fails with
// karvi.IsIllegalTransition, not retryable.
func (k *Karvi) SetStatus(ctx context.Context, taskID string, u StatusUpdate) error {
	const op = "karvi sink set status"
	if err := checkTaskID(op, taskID); err != nil {
		return err
	}
	if err := checkUpdate(op, u); err != nil {
		return err
	}
	var task karvi.Task
	var blockerReason string
	for attempt := 1; ; attempt++ {
		// The first plan starts from the task as this process last saw it
		// (its own last write, usually: no request); karvi refusing a step
		// (illegal, or no such task) is the cue to read the board again.
		var err error
		fresh := true
		if attempt == 1 {
			task, fresh, err = k.c.TaskView(ctx, taskID)
		} else {
			task, err = k.c.GetTaskFresh(ctx, taskID)
		}
		if karvi.IsNotFound(err) {
			return fmt.Errorf("%s %s: %w: %w", op, taskID, ErrTaskGone, err)
		}
		if err != nil {
			return err
		}
		if task.Status == "cancelled" && u.Status != "cancelled" {
			return fmt.Errorf("%s %s to %s: %w", op, taskID, u.Status, ErrBoardCancelled)
		}
		if !fresh && task.Status == u.Status {
			// An old view says there is nothing to move: only the board
			// itself may say so.
			continue
		}
		if task.Blocker != nil {
			blockerReason = task.Blocker.Reason
		}
		// The dispatch result rides on the last step when it can (karvi's
		// /update takes a status and the result together): one request
		// instead of two. Not for blocked (its reason goes through
		// /status), nor onto a task that holds a blocker only /status
		// clears.
		var carry map[string]any
		if want, ok := k.resultFor(task, u); ok && u.Status != "blocked" && task.Blocker == nil {
			carry = map[string]any{"result": want}
		}
		var stale, carried bool
		blockerReason, carried, stale, err = k.walk(ctx, taskID, task.Status, blockerReason, u, carry)
		if err == nil {
			if carried {
				return nil
			}
			break
		}
		if !stale || attempt >= replans {
			return err
		}
	}

	fields := map[string]any{}
	if u.Status == "blocked" && u.Reason != "" && blockerReason != u.Reason {
		askedAt := u.AskedAt
		if askedAt == "" {
			askedAt = jsonmerge.FormatTime(k.now())
		}
		fields["blocker"] = map[string]any{"reason": u.Reason, "askedAt": askedAt}
	}
	if want, ok := k.resultFor(task, u); ok {
		fields["result"] = want
	}
	if len(fields) == 0 {
		return nil
	}
	return k.c.UpdateTask(ctx, taskID, fields)
}

// resultFor is the task.result u's dispatch outcome writes, ok=false when
// there is none to write or karvi holds it already (as task shows it).
func (k *Karvi) resultFor(task karvi.Task, u StatusUpdate) (map[string]any, bool) {
	if !k.dispatchResult || !writesResult(u) {
		return nil, false
	}
	want := dispatchResult(u)
	if sameJSON(task.Result, want) {
		return nil, false
	}
	return want, true
}

// walk posts each step from status from to u.Status; the last one, when
// carry is not empty, goes through /update with carry's fields beside the
// status (carried=true). It returns the blocker reason karvi now holds,
// and stale=true when karvi refused a step as illegal, meaning the task
// moved under us and the path should be planned again.
func (k *Karvi) walk(ctx context.Context, taskID, from, blockerReason string, u StatusUpdate, carry map[string]any) (string, bool, bool, error) {
	path, err := karvi.PathTo(from, u.Status)
	if err != nil {
		var ke *karvi.Error
		if errors.As(err, &ke) {
			ke.Op = "karvi sink set status " + taskID
		}
		return blockerReason, false, false, err
	}
	carried := false
	for i, st := range path {
		reason := ""
		if st == "blocked" && i == len(path)-1 {
			reason = u.Reason
		}
		if i == len(path)-1 && len(carry) > 0 && st != "blocked" {
			fields := maps.Clone(carry)
			fields["status"] = st
			err = k.c.UpdateTask(ctx, taskID, fields)
			carried = err == nil
		} else {
			err = k.c.SetTaskStatus(ctx, taskID, st, reason)
		}
		if err != nil {
			// Refused as illegal, or the task is gone: it moved under us.
			return blockerReason, false, karvi.IsIllegalTransition(err) || karvi.IsNotFound(err), err
		}
		switch {
		case st != "blocked":
			blockerReason = ""
		case reason != "":
			blockerReason = reason
		}
	}
	return blockerReason, carried, false, nil
}

// dispatchResult is task.result for a finished dispatch.
func dispatchResult(u StatusUpdate) map[string]any {
	summary := u.Reason
	if summary == "" {
		summary = u.LastError
	}
	if summary == "" {
		summary = "dispatch " + u.DispatchState
		if u.PlanName != "" {
			summary = "edda plan " + u.PlanName + " " + u.DispatchState
		}
	}
	d := map[string]any{"state": u.DispatchState, "lastError": nil}
	if u.PlanID != "" {
		d["planId"] = u.PlanID
	}
	if u.PlanName != "" {
		d["planName"] = u.PlanName
	}
	if u.LastError != "" {
		d["lastError"] = u.LastError
	}
	return map[string]any{"summary": summary, "dispatch": d}
}

// sameJSON reports whether raw decodes to the same JSON value as v.
func sameJSON(raw json.RawMessage, v any) bool {
	if raw == nil {
		return false
	}
	var have, want any
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &want) != nil || json.Unmarshal(raw, &have) != nil {
		return false
	}
	return reflect.DeepEqual(have, want)
}
