package intakeact

import (
	"encoding/json"
	"errors"
)

// boardKeys and taskKeys are the parts of karvi's board the intake reads
// (package intake's Board and Task). The rest (signals, lessons, insights,
// step logs, ...) is dropped before the board goes into the workflow's
// history.
var (
	boardKeys = []string{"_version", "controls", "participants", "projects"}
	taskKeys  = []string{"id", "title", "description", "spec", "status", "assignee", "depends",
		"runtimeHint", "modelHint", "skill", "projectId", "target_repo", "estimate", "scope",
		"lastReply", "result", "steps", "history"}
	stepKeys    = []string{"state", "output_ref"}
	historyKeys = []string{"status", "from", "by", "reason"}
	resultKeys  = []string{"summary", "payload"}
)

// Trim keeps of karvi's board document the fields the intake reads. A
// task that is not an object is kept as it is, so that the intake reports
// it against the task.
func Trim(raw []byte) ([]byte, error) {
	var board map[string]json.RawMessage
	if err := json.Unmarshal(raw, &board); err != nil {
		return nil, errors.New("board: not a JSON object (is the address karvi's?)")
	}
	out := pick(board, boardKeys)
	if tp, ok := board["taskPlan"]; ok {
		var plan map[string]json.RawMessage
		if json.Unmarshal(tp, &plan) != nil {
			out["taskPlan"] = tp // the intake names the problem
		} else {
			keep := pick(plan, []string{"goal"})
			var tasks []json.RawMessage
			if t, ok := plan["tasks"]; ok && json.Unmarshal(t, &tasks) == nil {
				trimmed := make([]json.RawMessage, len(tasks))
				for i, t := range tasks {
					trimmed[i] = trimTask(t)
				}
				keep["tasks"], _ = json.Marshal(trimmed)
			} else if ok {
				keep["tasks"] = plan["tasks"]
			}
			out["taskPlan"], _ = json.Marshal(keep)
		}
	}
	return json.Marshal(out)
}

func trimTask(raw json.RawMessage) json.RawMessage {
	var t map[string]json.RawMessage
	if json.Unmarshal(raw, &t) != nil {
		return raw
	}
	out := pick(t, taskKeys)
	if v, ok := out["steps"]; ok {
		out["steps"] = trimList(v, stepKeys)
	}
	if v, ok := out["history"]; ok {
		out["history"] = trimList(v, historyKeys)
	}
	if v, ok := out["result"]; ok {
		var r map[string]json.RawMessage
		if json.Unmarshal(v, &r) == nil {
			out["result"], _ = json.Marshal(pick(r, resultKeys))
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func trimList(raw json.RawMessage, keys []string) json.RawMessage {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return raw
	}
	for i, it := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) == nil {
			items[i], _ = json.Marshal(pick(m, keys))
		}
	}
	b, _ := json.Marshal(items)
	return b
}

func pick(m map[string]json.RawMessage, keys []string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
