package bench

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// HistoryCost is what one task's workflow left in Temporal, summed over
// every run of its continue-as-new chain.
type HistoryCost struct {
	Runs   int `json:"runs"`
	Events int `json:"events"`
	// Bytes is the sum of the encoded sizes of the history events.
	Bytes int `json:"bytes"`
	// MaxRunEvents and MaxRunBytes are the largest single run, which is
	// what Temporal's per-run limits apply to.
	MaxRunEvents int `json:"maxRunEvents"`
	MaxRunBytes  int `json:"maxRunBytes"`
}

// History walks a workflow's runs from runID, following continue-as-new,
// and adds up their events and bytes.
func History(ctx context.Context, c client.Client, workflowID, runID string) (HistoryCost, error) {
	var cost HistoryCost
	for runID != "" && cost.Runs < 1000 {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events, size, next := 0, 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return cost, fmt.Errorf("history of %s run %s: %w", workflowID, runID, err)
			}
			events++
			size += proto.Size(ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		cost.Runs++
		cost.Events += events
		cost.Bytes += size
		cost.MaxRunEvents = max(cost.MaxRunEvents, events)
		cost.MaxRunBytes = max(cost.MaxRunBytes, size)
		runID = next
	}
	return cost, nil
}
