package taskflow

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/task"
)

// EventsWorkflow serves reads of one task's canonical event stream to
// clients that cannot see the worker's files: each read is an Update
// (taskapi.UpdateReadEvents) whose handler runs ReadEvents on a worker, a
// page of whole events from a byte offset, waiting briefly for the next.
// A client holds the offset, so a reader never misses nor doubles an event
// whatever happens to the workers, the task workflow or this one.
//
// It is a workflow of its own, not an Update of the task workflow, so
// reading never adds to the task's history (a follower reads every few
// hundred milliseconds while events flow), never holds the task's
// continue-as-new or completion back behind a handler, and works the same
// before and after the task's workflow closed. Clients start it or join the
// running one with update-with-start; several followers share it (Temporal
// lets 10 Updates be in flight at once). It ends once no read came for
// readerIdle, and continues as new when its own history grows.
func EventsWorkflow(ctx workflow.Context, in taskapi.EventsInput) error {
	rd := &reader{taskID: in.TaskID, runID: in.StreamOf()}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, taskapi.UpdateReadEvents, rd.read,
		workflow.UpdateHandlerOptions{Validator: rd.validate}); err != nil {
		return fmt.Errorf("register the read update: %w", err)
	}
	renew := func() bool {
		return rd.reads >= readerMaxReads || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}
	for {
		before := rd.reads
		if _, err := workflow.AwaitWithTimeout(ctx, readerIdle, renew); err != nil {
			return err
		}
		if renew() {
			// Reads under way finish first: an Update left in flight by
			// continue-as-new would fail its client. New reads are refused
			// meanwhile (validate), or overlapping polls could hold the
			// reader here for as long as they come.
			rd.renewing = true
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, taskapi.EventsWorkflowName, in)
		}
		if rd.reads == before && workflow.AllHandlersFinished(ctx) {
			return nil // nobody reads any more
		}
	}
}

const (
	// readerIdle is how long the reader waits for a read before it ends.
	readerIdle = time.Minute
	// readerMaxReads bounds the reads one run serves (each costs about
	// eight history events and carries its page twice) before it
	// continues as new.
	readerMaxReads = 300
)

type reader struct {
	taskID, runID string
	reads         int
	// renewing: the reader decided to continue as new.
	renewing bool
}

// validate refuses a read once the reader decided to continue as new
// (the client reads again, from the next run), and a read no worker could
// serve. A refused read is not written to history.
func (rd *reader) validate(req taskapi.EventsRead) error {
	if rd.renewing || rd.reads >= readerMaxReads {
		return temporal.NewApplicationError("the reader is continuing as new: read again",
			taskapi.ErrReaderRenewing)
	}
	return validateRead(req)
}

func (rd *reader) read(ctx workflow.Context, req taskapi.EventsRead) (taskapi.EventsPage, error) {
	rd.reads++
	wait := min(max(req.Wait, 0), taskapi.MaxEventsWait)
	summary := fmt.Sprintf("read events of task %s from byte %d", rd.taskID, req.Offset)
	var res taskact.ReadEventsResult
	err := workflow.ExecuteActivity(readOptions(ctx, wait, summary), acts.ReadEvents, taskact.ReadEventsRequest{
		RunID: rd.runID, Offset: req.Offset, MaxWait: wait, MaxBytes: req.MaxBytes,
	}).Get(ctx, &res)
	if err != nil {
		return taskapi.EventsPage{}, err
	}
	return taskapi.EventsPage{Lines: res.Lines, Next: res.Next, Missing: res.Missing}, nil
}

// validateRead refuses a read no worker could serve before it is written
// to history.
func validateRead(req taskapi.EventsRead) error {
	switch {
	case req.Offset < 0:
		return fmt.Errorf("offset %d is negative", req.Offset)
	case req.MaxBytes < 0:
		return errors.New("maxBytes is negative")
	}
	return nil
}
