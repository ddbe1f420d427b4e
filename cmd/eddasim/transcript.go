package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// edda keeps its agent's raw stream-json, one file per phase attempt, at
// transcripts/<phase>-<first 8 of the session id>.jsonl in the plan's state
// directory. The simulated agent writes what Claude Code's would: a system
// init line, the assistant's text and, when it finished, a result line
// with its cost, token usage and final text.

type transcript struct {
	path    string
	session string
}

// openTranscript starts the attempt's transcript with the init line.
// Failures are reported and otherwise ignored, as edda's are.
func (r *runner) openTranscript(phaseID string) *transcript {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	session := id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	t := &transcript{
		path:    filepath.Join(stateDir(r.cwd, r.plan.Name), "transcripts", phaseID+"-"+id[:8]+".jsonl"),
		session: session,
	}
	t.write(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "eddasim", "tools": []string{}})
	return t
}

// finish writes the assistant's text and, for an agent that returned a
// result (done, budget, max turns), the result line. A crashed, timed-out
// or interrupted agent wrote none.
func (t *transcript) finish(phaseID string, attempt int, res agentResult) {
	text := fmt.Sprintf("eddasim: phase %s, attempt %d", phaseID, attempt)
	if res.codex {
		t.write(map[string]any{"type": "turn.failed", "error": map[string]any{"message": codexText(res.limitReset)}})
		return
	}
	if !res.limitReset.IsZero() {
		t.write(map[string]any{"type": "rate_limit_event", "session_id": t.session,
			"rate_limit_info": map[string]any{"status": "rejected", "resetsAt": res.limitReset.Unix(), "rateLimitType": "five_hour"}})
		t.write(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 429,
			"session_id": t.session, "result": limitText(res.limitReset), "num_turns": 1, "total_cost_usd": 0,
			"usage": map[string]any{"input_tokens": 0, "output_tokens": 0}})
		return
	}
	t.write(map[string]any{"type": "assistant", "session_id": t.session,
		"message": map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": text}}}})
	subtype := ""
	switch res.kind {
	case agentDone:
		subtype = "success"
	case agentBudget:
		subtype = "error_max_budget_usd"
	case agentMaxTurns:
		subtype = "error_max_turns"
	default:
		return
	}
	line := map[string]any{"type": "result", "subtype": subtype, "is_error": subtype != "success",
		"session_id": t.session, "result": text, "num_turns": 1,
		"usage": map[string]any{"input_tokens": 1000, "output_tokens": 200}}
	if res.cost != nil {
		line["total_cost_usd"] = *res.cost
	}
	t.write(line)
}

func (t *transcript) write(v any) {
	data, err := json.Marshal(v)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(t.path), 0o755); err == nil {
			err = appendLine(t.path, append(data, '\n'))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "eddasim: transcript %s: %v\n", t.path, err)
	}
}

// toolNames are the tools a simulated agent calls, in turn.
var toolNames = []string{"Read", "Grep", "Bash", "Edit"}

// tools writes n tool calls as Claude Code's stream-json shows them: an
// assistant message holding a tool_use, then a user message holding its
// tool_result, each line timestamped between from and to.
func (t *transcript) tools(n int, from, to time.Time) {
	if n <= 0 {
		return
	}
	short := t.session[:8]
	step := to.Sub(from) / time.Duration(2*n+1)
	at := func(k int) string { return from.Add(step * time.Duration(k)).UTC().Format(time.RFC3339Nano) }
	for i := 1; i <= n; i++ {
		name := toolNames[(i-1)%len(toolNames)]
		id := fmt.Sprintf("toolu_%s_%d", short, i)
		t.write(map[string]any{"type": "assistant", "session_id": t.session, "timestamp": at(2*i - 1),
			"message": map[string]any{"id": fmt.Sprintf("msg_%s_%d", short, i), "role": "assistant", "model": "eddasim",
				"stop_reason": "tool_use",
				"content": []map[string]any{
					{"type": "text", "text": fmt.Sprintf("calling %s (%d of %d)", name, i, n)},
					{"type": "tool_use", "id": id, "name": name, "input": map[string]any{"n": i}},
				},
				"usage": map[string]any{"input_tokens": 100 * i, "output_tokens": 20}}})
		t.write(map[string]any{"type": "user", "session_id": t.session, "timestamp": at(2 * i),
			"message": map[string]any{"role": "user", "content": []map[string]any{
				{"type": "tool_result", "tool_use_id": id, "content": fmt.Sprintf("%s result %d", name, i), "is_error": false}}}})
	}
}
