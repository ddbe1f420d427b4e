package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/workflows"
)

// QueryStatus asks a task's workflow for its status query.
func QueryStatus(ctx context.Context, cl client.Client, taskID string) (workflows.Status, error) {
	v, err := cl.QueryWorkflow(ctx, workflows.WorkflowID(taskID), "", workflows.QueryStatus)
	if err != nil {
		return workflows.Status{}, err
	}
	var s workflows.Status
	return s, v.Get(&s)
}

// WaitStatus polls the status query until cond holds or ctx ends; Temporal
// pushes no query results, so polling is the only way to watch them. On
// failure it returns the last status seen and why it gave up.
func WaitStatus(ctx context.Context, cl client.Client, taskID string, cond func(workflows.Status) bool) (workflows.Status, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last workflows.Status
	var lastErr error
	for {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := QueryStatus(qctx, cl, taskID)
		cancel()
		if err == nil && cond(s) {
			return s, nil
		}
		last, lastErr = s, err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w (last status %+v, last query error %v)", ctx.Err(), last, lastErr)
		case <-tick.C:
		}
	}
}

// FileBrief is the merged brief the file sink holds for a task, without what
// depends on the clock (see NormalizeBrief).
func FileBrief(sinkDir, taskID string) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(sinkDir, taskID, "brief.json"))
	if err != nil {
		return nil, err
	}
	return NormalizeBrief(data)
}

// FilePatches are the PATCH bodies the file sink received for a task, in
// order.
func FilePatches(sinkDir, taskID string) ([]map[string]any, error) {
	recs, err := ReadJSONL(filepath.Join(sinkDir, taskID, "patches.jsonl"))
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		body, ok := rec["body"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("patch record without body: %v", rec)
		}
		out = append(out, body)
	}
	return out, nil
}

// FileStatus is the file sink's status.json for a task.
func FileStatus(sinkDir, taskID string) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(sinkDir, taskID, "status.json"))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}
