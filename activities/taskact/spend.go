package taskact

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/mapping/redact"
)

// transcriptsDir is where edda keeps the agent's raw stream-json, one file
// per phase attempt: <phase>-<first 8 of the session id>.jsonl.
const transcriptsDir = "transcripts"

// maxTranscriptLine bounds one transcript line read for its cost; longer
// lines (a large tool output) are skipped.
const maxTranscriptLine = 4 << 20

// conductorSpend reads what the conductor reports it spent so far:
// state.json's total (edda adds each agent call to it before the checks
// run, failed attempts included) and, per phase, the costs the agents'
// transcripts report. ok is false when state.json cannot be read.
func conductorSpend(plan PlanInfo) (mapping.Spend, bool) {
	return ConductorSpend(plan.StatePath)
}

// ConductorSpend is conductorSpend for the state.json at statePath (its
// transcripts beside it): what a test expects the brief to show.
func ConductorSpend(statePath string) (mapping.Spend, bool) {
	data, err := os.ReadFile(statePath)
	if err != nil {
		return mapping.Spend{}, false
	}
	cs, err := mapping.ParseConductorState(redact.JSON(data))
	if err != nil {
		return mapping.Spend{}, false
	}
	total := cs.TotalCostUSD
	return mapping.Spend{
		TotalUSD: &total,
		ByPhase:  transcriptCosts(filepath.Join(filepath.Dir(statePath), transcriptsDir)),
		Culprit:  mapping.SpendCulprit(cs),
	}, true
}

// transcriptCosts sums, per phase, the cost each transcript's last result
// line reports. A missing directory (an edda that keeps none) is nil.
func transcriptCosts(dir string) map[string]float64 {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		if c, ok := transcriptCost(f); ok {
			out[name[:i]] += c
		}
	}
	return out
}

// transcriptCost is total_cost_usd of the last `result` line of one
// transcript (an agent reports its session's running total there).
func transcriptCost(path string) (float64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxTranscriptLine)
	cost, found := 0.0, false
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"result"`) {
			continue
		}
		var r struct {
			Type         string   `json:"type"`
			TotalCostUSD *float64 `json:"total_cost_usd"`
		}
		if json.Unmarshal(line, &r) == nil && r.Type == "result" && r.TotalCostUSD != nil && *r.TotalCostUSD >= 0 {
			cost, found = *r.TotalCostUSD, true
		}
	}
	return cost, found
}

// applySpend raises the brief's costs to what the conductor reports it
// spent, and sends that as a patch when it moved them. Only a delivery
// that has read the event log to its end does: state.json is ahead of the
// log while events wait to be delivered (karvi down, a long backlog), and
// a cost patch sent then would land between the events' own patches, on
// costs they are about to report anyway. The delivery that catches up
// applies it.
func (d *delivery) applySpend(ctx context.Context) error {
	if !d.caughtUp() {
		return nil
	}
	sp, ok := conductorSpend(d.req.Plan)
	if !ok {
		return nil
	}
	c, changed := d.brief.ApplySpend(sp)
	if !changed {
		return nil
	}
	return d.patch(ctx, d.enc.Patch(&d.brief, c))
}

// caughtUp reports whether the delivery's cursor is at the end of the
// event log as it is now.
func (d *delivery) caughtUp() bool {
	fi, err := os.Stat(d.req.Plan.EventsPath)
	return err != nil || fi.Size() <= d.res.Next.Offset
}
