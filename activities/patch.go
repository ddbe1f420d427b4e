package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// patchProgress (a field of Activities) remembers, for each PatchBrief
// execution (workflow run and local activity id), how many patches of its
// batch the sink acknowledged. A retry of the same batch starts after them:
// re-sending them would put older bodies after newer ones, and karvi's
// brief, whose log travels whole in every patch, would move backwards until
// the retry caught up. Only a worker crash forgets the progress; the batch
// is then sent whole again, which still converges to the same brief.

// sendPatches is PatchBrief's body: the patches in order, resuming a retried
// batch after the patches already delivered.
func (a *Activities) sendPatches(ctx context.Context, req PatchRequest) error {
	key := ""
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		key = info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	start := 0
	if v, ok := a.patchProgress.Load(key); ok && key != "" {
		start = v.(int)
	}
	for i := start; i < len(req.Patches); i++ {
		if err := a.Sink.PatchBrief(ctx, req.TaskID, req.Patches[i].Body); err != nil {
			err = sinkError("patch brief of task "+req.TaskID, err)
			var appErr *temporal.ApplicationError
			if key != "" {
				if errors.As(err, &appErr) && appErr.NonRetryable() {
					a.patchProgress.Delete(key) // no retry will come
				} else {
					a.patchProgress.Store(key, i)
				}
			}
			return err
		}
	}
	if key != "" {
		a.patchProgress.Delete(key)
	}
	return nil
}
