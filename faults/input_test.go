//go:build realserver

package faults

// Event-log input: a fake conductor writes a crafted
// events.jsonl, with garbage between the valid lines, and the workflow must
// never crash, must count every malformed line where the status query shows
// it, and must end with the brief the valid lines alone produce.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/testrig"
)

// fakeEddaScript stands in for edda: `conduct run PLAN --cwd DIR --json`
// ignores the plan, appends $FAKE_EDDA_DIR/<task>/chunk-1, chunk-2, ... to
// {cwd}/.edda/conductor/{plan name}/events.jsonl (a chunk with a gate-N file
// waits for release-N first), then installs state.json, prints stdout, and
// exits with the code in exit. Every other verb (abort, status) succeeds
// without doing anything. The task is the last element of --cwd.
const fakeEddaScript = `#!/bin/sh
[ "$1" = conduct ] || exit 2
[ "$2" = run ] || exit 0
plan=$3
shift 3
cwd=
while [ $# -gt 0 ]; do
  case $1 in --cwd) cwd=$2; shift 2 ;; *) shift ;; esac
done
name=$(sed -n 's/^name: *//p' "$plan" | head -n 1 | tr -d "\"'")
src=$FAKE_EDDA_DIR/$(basename "$cwd")
dir=$cwd/.edda/conductor/$name
mkdir -p "$dir" || exit 1
i=1
while [ -f "$src/chunk-$i" ]; do
  if [ -f "$src/gate-$i" ]; then
    while [ ! -f "$src/release-$i" ]; do sleep 0.05; done
  fi
  cat "$src/chunk-$i" >> "$dir/events.jsonl" || exit 1
  i=$((i+1))
done
if [ -f "$src/state.json" ]; then
  cp "$src/state.json" "$dir/.state.tmp" && mv "$dir/.state.tmp" "$dir/state.json"
fi
[ -f "$src/stdout" ] && cat "$src/stdout"
exit "$(cat "$src/exit" 2>/dev/null || echo 0)"
`

// fakeEdda is one fake conductor and the directory of its scripted runs.
type fakeEdda struct {
	bin string
	dir string
}

func newFakeEdda(t *testing.T) *fakeEdda {
	t.Helper()
	root := t.TempDir()
	f := &fakeEdda{bin: filepath.Join(root, "edda"), dir: filepath.Join(root, "runs")}
	require.NoError(t, os.WriteFile(f.bin, []byte(fakeEddaScript), 0o755))
	require.NoError(t, os.MkdirAll(f.dir, 0o755))
	return f
}

// options makes a rig whose worker runs this fake as its conductor.
func (f *fakeEdda) options(o testrig.Options) testrig.Options {
	o.WorkerArgs = append(append([]string(nil), o.WorkerArgs...), "-conductor", f.bin)
	o.Env = append(append([]string(nil), o.Env...), "FAKE_EDDA_DIR="+f.dir)
	return o
}

// fakeRun is what the fake conductor does for one task.
type fakeRun struct {
	chunks [][]byte
	gated  map[int]bool // 1-based chunk numbers that wait for release
	state  []byte       // state.json; nil writes none
	stdout []byte
	exit   int
}

func (f *fakeEdda) script(t *testing.T, taskID string, run fakeRun) {
	t.Helper()
	dir := filepath.Join(f.dir, taskID)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for i, c := range run.chunks {
		n := i + 1
		if run.gated[n] {
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("gate-%d", n)), nil, 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("chunk-%d", n)), c, 0o644))
	}
	if run.state != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "state.json"), run.state, 0o644))
	}
	if run.stdout != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stdout"), run.stdout, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "exit"), []byte(fmt.Sprint(run.exit)), 0o644))
}

func (f *fakeEdda) release(t *testing.T, taskID string, chunk int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, taskID, fmt.Sprintf("release-%d", chunk)), nil, 0o644))
}

// logLine is one line of a crafted log: its bytes (without '\n') and
// whether the bridge must accept it as an event.
type logLine struct {
	data  string
	valid bool
}

func good(format string, args ...any) logLine { return logLine{fmt.Sprintf(format, args...), true} }
func bad(data string) logLine                 { return logLine{data, false} }

func ts(i int) string { return fmt.Sprintf("2026-03-01T10:00:%02dZ", i) }

// joinLines renders lines, each ended by '\n'; skipInvalid leaves out the
// lines the bridge must reject (the clean twin of a crafted log).
func joinLines(lines []logLine, skipInvalid bool) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		if skipInvalid && !l.valid {
			continue
		}
		b.WriteString(l.data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func countValid(lines []logLine, valid bool) int {
	n := 0
	for _, l := range lines {
		if l.valid == valid {
			n++
		}
	}
	return n
}

// hostileLog is the crafted log of TestEventLogInput: chunk one (ending in
// half a line), and chunk two that completes that line seconds later.
func hostileLog() (first, second []logLine, partial string) {
	// One valid line of just under the 1 MiB line limit: an event of an
	// unknown type whose error text is cut to mapping.MaxTextBytes.
	bigText := strings.Repeat("the agent said a lot ", (1<<20-200)/21)
	first = []logLine{
		good(`{"seq":0,"ts":"%s","type":"plan_start","plan_name":"whatever-the-conductor-says","phase_count":3}`, ts(0)),
		bad(`this is not json`),
		good(`{"seq":1,"ts":"%s","type":"phase_start","phase_id":"implement","attempt":1}`, ts(1)),
		bad(`{"seq":2,"type":"phase_start","phase_id":`),
		bad(`[1,2,3]`),
		bad(`{"seq":"two","type":"phase_start","phase_id":"implement"}`),
		bad(`{"type":42}`),
		bad(`{"seq":3}`),
		good(`{"seq":4,"ts":"%s","type":"agent_output","phase_id":"implement","error":"%s"}`, ts(2), bigText),
		bad(strings.Repeat("x", 1<<20+10)), // longer than any line the tail accepts
		bad("\xff\xfe\xfd\xfc not even text"),
		good(`{"seq":6,"ts":"%s","type":"gate_entered","phase_id":"implement","reason":"caf`+"\xe9 \xff"+`"}`, ts(3)),
		bad("\x00\x00\x00\x00"),
		bad(`{"seq":7,"type":"phase_start","phase_id":"te` + "\x00" + `st"}`),
		good(`{"seq":8,"ts":"%s","type":"phase_passed","phase_id":"implement","attempt":1,"duration_ms":1000,"cost_usd":0.85}`+"\r", ts(4)),
		good(`{"seq":9,"ts":"%s","type":"AgentProgress","phase_id":"implement","n":1,"extra":{"nested":[1,{"a":null}]}}`, ts(5)),
		// Out of order: docs passes before it starts, and seq jumps.
		good(`{"seq":12,"ts":"%s","type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":500,"cost_usd":0.18}`, ts(6)),
		// seq restarts, as edda's does on every resume.
		good(`{"seq":0,"ts":"%s","type":"phase_start","phase_id":"test","attempt":1}`, ts(7)),
		good(`{"seq":1,"ts":"%s","type":"phase_failed","phase_id":"no-such-phase","attempt":1,"error":"ignored"}`, ts(8)),
		bad(`{"seq":2,"type":"phase_start","phase_id":"test","cost_usd":"free"}`),
	}
	partial = fmt.Sprintf(`{"seq":3,"ts":"%s","type":"phase_passed","phase_id":"test","attempt":1,"duration_ms":2000,"cost_usd":0.42}`, ts(9))
	second = []logLine{
		good(`%s`, partial),
		good(`{"seq":4,"ts":"%s","type":"phase_start","phase_id":"docs","attempt":1}`, ts(10)),
		good(`{"seq":5,"ts":"%s","type":"phase_passed","phase_id":"docs","attempt":1,"duration_ms":500,"cost_usd":0.18}`, ts(11)),
		bad(`}}}}`),
		good(`{"seq":6,"ts":"%s","type":"plan_completed","phases_passed":3,"total_cost_usd":1.45}`, ts(12)),
	}
	return first, second, partial
}

const completedState = `{"plan_name":"x","plan_status":"completed","total_cost_usd":1.45,"phases":[` +
	`{"id":"implement","status":"passed","attempts":1},{"id":"test","status":"passed","attempts":1},` +
	`{"id":"docs","status":"passed","attempts":1}]}`

func TestEventLogInput(t *testing.T) {
	t.Parallel()
	fake := newFakeEdda(t)
	r := newRig(t, fake.options(testrig.Options{}))

	first, second, partial := hostileLog()
	cut := len(partial) / 2
	chunk1 := append(joinLines(first, false), partial[:cut]...)
	chunk2 := joinLines(second, false)[cut:]
	fake.script(t, "IN1", fakeRun{chunks: [][]byte{chunk1, chunk2}, gated: map[int]bool{2: true},
		state: []byte(completedState)})
	// The clean twin: the same valid lines, nothing else, in one piece.
	all := append(append([]logLine(nil), first...), second...)
	fake.script(t, "IN2", fakeRun{chunks: [][]byte{joinLines(all, true)}, state: []byte(completedState)})

	hostile := r.Start(testrig.Dispatch(t, "IN1", "Hostile event log."))
	clean := r.Start(testrig.Dispatch(t, "IN2", "Clean event log."))

	// Everything before the partial line is consumed and counted.
	wantValid1, wantBad1 := countValid(first, true), countValid(first, false)
	s := r.WaitFor("IN1", "first chunk consumed", func(s taskapi.Status) bool {
		return s.EventsApplied == wantValid1 && s.Malformed == wantBad1
	})
	require.Equal(t, 11, wantBad1)
	requireReadableSample(t, s.LastMalformed)
	require.Contains(t, s.LastMalformed, "cost_usd", "the last bad line is named by its problem")
	require.Equal(t, "test", s.CurrentPhase)

	// The partial line completes seconds later: the pause is the fault
	// itself, not a wait for something. Meanwhile the half line is neither
	// an event nor a malformed line.
	time.Sleep(2 * time.Second)
	stillPartial, err := r.Status("IN1")
	var final taskapi.Status
	require.NoError(t, err)
	require.EqualValues(t, "running", stillPartial.Stage)
	require.Equal(t, wantValid1, stillPartial.EventsApplied)
	require.Equal(t, wantBad1, stillPartial.Malformed)
	fake.release(t, "IN1", 2)

	resH, resC := r.Result(hostile), r.Result(clean)
	require.EqualValues(t, "completed", resH.Outcome.TaskStatus)
	require.EqualValues(t, "completed", resC.Outcome.TaskStatus)

	final, err = r.Status("IN1")
	require.NoError(t, err)
	require.Equal(t, countValid(all, true), final.EventsApplied)
	require.Equal(t, countValid(all, false), final.Malformed)
	require.Contains(t, final.LastMalformed, "}}}}")
	requireReadableSample(t, final.LastMalformed)
	t.Logf("hostile log: %d events applied, %d malformed lines, last: %q",
		final.EventsApplied, final.Malformed, final.LastMalformed)
	twin, err := r.Status("IN2")
	require.NoError(t, err)
	require.Zero(t, twin.Malformed)
	require.Equal(t, final.EventsApplied, twin.EventsApplied)

	// The brief is the valid lines' brief: the same as the clean twin's,
	// in the workflow and in the sink.
	require.Equal(t, briefWithoutIdentity(t, testrig.MustJSON(t, resC.Brief)), briefWithoutIdentity(t, testrig.MustJSON(t, resH.Brief)))
	require.Equal(t, briefWithoutIdentity(t, r.FileBriefRaw("IN2")), briefWithoutIdentity(t, r.FileBriefRaw("IN1")))
	b := resH.Brief
	for _, id := range []string{"implement", "test", "docs"} {
		require.Equal(t, mapping.PhasePassed, b.Phases[id].Status, "phase %s", id)
	}
	require.Equal(t, 3, b.CompletedPhases)
	require.NotNil(t, b.Cost.TotalUSD)
	require.InDelta(t, 1.45, *b.Cost.TotalUSD, 1e-9)
	require.Len(t, b.Log, countValid(all, true), "one log entry per valid event")
	actions := map[string]string{}
	for _, e := range b.Log {
		actions[e.Action] = e.Detail
		require.True(t, utf8.ValidString(e.Detail), "log detail %q", e.Detail)
		require.NotContains(t, e.Detail, "\x00")
	}
	require.True(t, strings.HasPrefix(actions["agent_output"], "implement: the agent said a lot"), "the 1 MiB line is an event")
	require.LessOrEqual(t, len(actions["agent_output"]), mapping.MaxTextBytes+64, "its text is cut")
	require.Equal(t, "implement: caf\uFFFD \uFFFD", actions["gate_entered"])
	require.Contains(t, actions, "agent_progress")

	// Never a crash: no workflow task failed, the worker still runs.
	noWorkflowTaskFailures(t, r, "IN1")
	require.NoError(t, syscall.Kill(r.Worker().PID(), 0), "the worker survived")
	for _, p := range r.WorkerLogs() {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NotContains(t, string(data), "panic")
	}
}

// requireReadableSample: a malformed-line sample is short, valid UTF-8 and
// free of NUL, whatever the line held.
func requireReadableSample(t *testing.T, s string) {
	t.Helper()
	require.NotEmpty(t, s)
	require.True(t, utf8.ValidString(s), "%q", s)
	require.NotContains(t, s, "\x00")
	require.LessOrEqual(t, len(s), 256)
}

// briefWithoutIdentity is a normalized brief without the task id and plan
// name, which differ between a task and its twin.
func briefWithoutIdentity(t *testing.T, data []byte) map[string]any {
	t.Helper()
	b := testrig.NormalizeBrief(t, data)
	delete(b["meta"].(map[string]any), "taskId")
	delete(b["plan"].(map[string]any), "name")
	return b
}
