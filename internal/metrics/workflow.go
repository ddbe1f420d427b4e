package metrics

import "go.temporal.io/sdk/client"

// AttemptStarted counts an attempt a task workflow begins. h is the
// workflow's handler, workflow.GetMetricsHandler(ctx): it records nothing
// while the workflow replays, so each attempt counts once.
func AttemptStarted(h client.MetricsHandler) {
	h.Counter(AttemptsStarted).Inc(1)
}

// AttemptEnded counts an attempt that ended, by outcome: completed,
// blocked, aborted or redispatched. h is as for AttemptStarted.
func AttemptEnded(h client.MetricsHandler, outcome string) {
	h.WithTags(map[string]string{"outcome": outcome}).Counter(AttemptsEnded).Inc(1)
}

// Pool records an agent slot pool's holders, waiters and limit, each time
// they may have changed. h is the pool workflow's handler, as for
// AttemptStarted: a pool replaying after a worker restart reports only its
// state from then on.
func Pool(h client.MetricsHandler, pool string, held, waiting, maxConcurrent int) {
	h = h.WithTags(map[string]string{"pool": pool})
	h.Gauge(SlotsHeld).Update(float64(held))
	h.Gauge(SlotsWaiting).Update(float64(waiting))
	h.Gauge(SlotsMax).Update(float64(maxConcurrent))
}

// Stalled counts a phase that stalled (no event and no agent output for
// its threshold), by the action that followed: warn, redispatch or abort.
// h is as for AttemptStarted.
func Stalled(h client.MetricsHandler, action string) {
	h.WithTags(map[string]string{"action": action}).Counter(PhaseStalls).Inc(1)
}

// Kinds of the karvi intake's problem with its board (IntakeKarvi).
const (
	IntakeOK           = ""
	IntakeUnreachable  = "unreachable"
	IntakeUnauthorized = "unauthorized"
)

// IntakeKarvi records whether the karvi intake of board can read it now:
// kind is IntakeOK, IntakeUnreachable or IntakeUnauthorized; began counts
// a problem that has just begun. h is the intake workflow's handler, as
// for AttemptStarted: a worker that restarts reports the state from the
// intake's next read on.
func IntakeKarvi(h client.MetricsHandler, board, kind string, began bool) {
	h = h.WithTags(map[string]string{"board": board})
	down, refused := 0.0, 0.0
	switch kind {
	case IntakeUnreachable:
		down = 1
	case IntakeUnauthorized:
		refused = 1
	}
	h.Gauge(IntakeKarviUnreachable).Update(down)
	h.Gauge(IntakeKarviUnauthorized).Update(refused)
	if began && kind != IntakeOK {
		h.WithTags(map[string]string{"kind": kind}).Counter(IntakeKarviProblems).Inc(1)
	}
}
