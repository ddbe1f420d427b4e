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
