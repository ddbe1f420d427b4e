package main

import (
	"fmt"
	"time"
)

// stallAgent plays a stalled agent (stall=DURATION): after its init line
// it writes nothing for the duration, so edda writes no event either;
// then it writes a line and works on as directed (ok). A phase timeout or
// a SIGINT during the stall ends the attempt as it would end the agent
// (ok false, with the result). A redispatched plan does not stall.
func (r *runner) stallAgent(ph *Phase, spec simSpec, tr *transcript) (agentResult, bool) {
	if spec.Stall <= 0 || ph.Env["REDISPATCH"] != "" {
		return agentResult{}, true
	}
	var timeoutC <-chan time.Time
	if !spec.HangForever {
		t := time.NewTimer(time.Duration(agentTimeoutSec(ph)) * time.Second)
		defer t.Stop()
		timeoutC = t.C
	}
	select {
	case <-time.After(spec.Stall):
	case <-timeoutC:
		return agentResult{kind: agentTimeout}, false
	case <-r.ctx.Done():
		return agentResult{kind: agentShutdown, error: "conductor shutdown"}, false
	}
	tr.write(map[string]any{"type": "assistant", "session_id": tr.session,
		"message": map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text",
			"text": fmt.Sprintf("eddasim: phase %s works again after a stall of %s", ph.ID, spec.Stall)}}}})
	return agentResult{}, true
}
