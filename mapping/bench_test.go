package mapping

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkParseReduce measures the worker's per-event hot path: one
// events.jsonl line parsed and folded into the brief, producing the PATCH
// body that carries it. Run it on one core:
//
//	go test -run '^$' -bench ParseReduce -cpu 1 ./mapping/
//
// The events/s metric is what the throughput target (>= 200,000 events/s on
// one core) is about. The sub-benchmarks differ in how long the brief's log is, since
// every PATCH body carries the whole log (karvi replaces arrays on merge):
//
//   - exampleA: example A's 3-phase run, a fresh brief every 8 events.
//   - plan1000: a 1,000-event plan (3 phases with agent_progress between),
//     a fresh brief every plan, so the log grows to DefaultLogLimit and stays.
//   - fullLog: steady state with the log at DefaultLogLimit entries: the
//     worst case, every body carries 500 entries.
func BenchmarkParseReduce(b *testing.B) {
	exampleA, err := os.ReadFile(filepath.Join(examplesDir, "A", "events.snake.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	summary := PlanSummary{Name: "karvi-t5-020d01", PhaseIDs: []string{"implement", "test", "docs"}, TimeoutSec: 600}

	b.Run("exampleA", func(b *testing.B) {
		benchStream(b, splitLines(exampleA), summary, true)
	})
	b.Run("plan1000", func(b *testing.B) {
		benchStream(b, progressPlan(1000), summary, true)
	})
	b.Run("fullLog", func(b *testing.B) {
		benchStream(b, progressPlan(DefaultLogLimit*4), summary, false)
	})
}

// benchStream parses and reduces lines in a loop, one event per iteration.
// With fresh set, each pass over lines starts a new brief (a new plan);
// otherwise one brief takes every event, after a warm-up pass that fills
// its log.
func benchStream(b *testing.B, lines [][]byte, summary PlanSummary, fresh bool) {
	st := NewBriefState("T5", summary)
	var enc BriefEncoder
	var off int64
	step := func(line []byte) {
		ev, err := ParseEvent(line)
		if err != nil {
			b.Fatalf("parse %q: %v", line, err)
		}
		off += int64(len(line)) + 1
		ev.Pos = Position{Offset: off}
		c, ok := st.Reduce(ev)
		if !ok && ev.Type != EventPlanAborted {
			b.Fatalf("event at %d produced no patch", off)
		}
		if ok {
			enc.Patch(&st, c)
		}
	}
	if !fresh {
		for _, l := range lines {
			step(l)
		}
		if len(st.Brief.Log) != DefaultLogLimit {
			b.Fatalf("warm-up left %d log entries, want %d", len(st.Brief.Log), DefaultLogLimit)
		}
	}
	var bytesIn int64
	for _, l := range lines {
		bytesIn += int64(len(l))
	}
	b.SetBytes(bytesIn / int64(len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(lines)
		if fresh && k == 0 {
			st = NewBriefState("T5", summary)
			enc.Init(&st)
			off = 0
		}
		step(lines[k])
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "events/s")
	}
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// progressPlan renders the lines the simulator writes for a 3-phase plan
// with agent_progress events between phase_start and phase_passed, n lines
// in all, with RFC3339Nano timestamps as edda writes them.
func progressPlan(n int) [][]byte {
	phases := []string{"implement", "test", "docs"}
	t0 := time.Date(2026, 2, 28, 3, 0, 0, 0, time.UTC)
	var out [][]byte
	seq := 0
	add := func(format string, args ...any) {
		ts := t0.Add(time.Duration(seq) * 1234567 * time.Nanosecond).Format(time.RFC3339Nano)
		head := fmt.Sprintf(`{"seq":%d,"ts":%q,`, seq, ts)
		out = append(out, []byte(head+fmt.Sprintf(format, args...)+"}"))
		seq++
	}
	// plan_start, 3 x (start + passed), plan_completed: 8 framing events.
	progress := n - 8
	add(`"type":"plan_start","plan_name":"karvi-t5-020d01","phase_count":3`)
	for i, ph := range phases {
		add(`"type":"phase_start","phase_id":%q,"attempt":1`, ph)
		per := progress / len(phases)
		if i == len(phases)-1 {
			per = progress - per*(len(phases)-1)
		}
		for k := 1; k <= per; k++ {
			add(`"type":"agent_progress","phase_id":%q,"n":%d`, ph, k)
		}
		add(`"type":"phase_passed","phase_id":%q,"attempt":1,"duration_ms":119000,"cost_usd":0.85`, ph)
	}
	add(`"type":"plan_completed","phases_passed":3,"total_cost_usd":2.55`)
	return out
}
