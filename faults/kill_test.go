//go:build realserver

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/testkit/testrig"
	"karvi-edda-temporal/workflows"
)

// faultSeed is the seed of a randomised fault test: FAULTS_SEED when set (to
// replay a failure), else the clock. It is always logged.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "FAULTS_SEED")
		seed = v
	}
	t.Logf("seed %d (FAULTS_SEED=%d replays this run's choices)", seed, seed)
	return seed
}

// writeGate sits in front of karvifake and holds every write for a seeded
// 50-100 ms, either before karvi applies it (a kill then loses the request)
// or after (karvi applied it and the answer is lost), so SIGKILLs land
// mid-PATCH in both ways. It also tells the chaos loop when a brief PATCH
// is in flight. karvifake's own SetLatency cannot say either.
type writeGate struct {
	inner    http.Handler
	mu       sync.Mutex
	rnd      *rand.Rand
	inflight atomic.Int32  // brief PATCHes being handled
	arrived  chan struct{} // a token per PATCH arrival, dropped when full
}

func (g *writeGate) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPatch && req.Method != http.MethodPost && req.Method != http.MethodPut {
		g.inner.ServeHTTP(w, req)
		return
	}
	g.mu.Lock()
	delay := time.Duration(50+g.rnd.IntN(51)) * time.Millisecond
	before := g.rnd.IntN(2) == 0
	g.mu.Unlock()
	if req.Method == http.MethodPatch && strings.HasPrefix(req.URL.Path, "/api/brief/") {
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		select {
		case g.arrived <- struct{}{}:
		default:
		}
	}
	if before && !sleepCtx(req.Context(), delay) {
		return // the worker died: karvi never saw the request
	}
	g.inner.ServeHTTP(w, req) // buffered: the answer leaves when we return
	if !before {
		sleepCtx(req.Context(), delay)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// hasEvent reports whether a plan's events.jsonl (read as it is now) holds
// an event of type typ for phase (any phase when empty).
func hasEvent(path, typ, phase string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type    string `json:"type"`
			PhaseID string `json:"phase_id"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == typ && (phase == "" || ev.PhaseID == phase) {
			return true
		}
	}
	return false
}

// conductorStage names where a plan's conductor is, from its events.jsonl:
// "not started", "in <phase>", "after <phase>" or "ended".
func conductorStage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return "not started"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var ev struct {
		Type    string `json:"type"`
		PhaseID string `json:"phase_id"`
	}
	if json.Unmarshal([]byte(lines[len(lines)-1]), &ev) != nil {
		return "mid-line"
	}
	switch ev.Type {
	case "phase_start":
		return "in " + ev.PhaseID
	case "phase_passed":
		return "after " + ev.PhaseID
	case "plan_start":
		return "plan started"
	default:
		return "ended"
	}
}

// exampleMessage is example A's message with its costs and the given per-phase
// simulated agent times (milliseconds); extra is added to the test phase.
func exampleMessage(implement, test, docs int, extra string) string {
	return fmt.Sprintf("Add user authentication with JWT. [sim phase=implement cost=0.85 delay=%dms] "+
		"[sim phase=test cost=0.42 delay=%dms %s] [sim phase=docs cost=0.18 delay=%dms]", implement, test, extra, docs)
}

// The worker is SIGKILLed at seeded random points over four 3-phase runs
// (and restarted after a seeded pause), some kills aimed at a brief PATCH in
// flight and some right after a signal. Each task must end as an undisturbed
// run would: the same brief (times aside), one log entry per event, one
// conductor process per attempt, nothing left running; and karvi's brief,
// sampled throughout, never moves backwards nor shows an entry twice.
func TestWorkerSIGKILLChaos(t *testing.T) {
	seed := faultSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	gate := &writeGate{rnd: rand.New(rand.NewPCG(rnd.Uint64(), 1)), arrived: make(chan struct{}, 1)}
	r := newRig(t, testrig.Options{Sink: "karvi", KarviWrap: func(h http.Handler) http.Handler {
		gate.inner = h
		return gate
	}})

	const (
		plain1, plain2 = "KILL1", "KILL2" // complete undisturbed but for the kills
		redo           = "KILL3"          // redispatched during its test phase
		stop           = "KILL4"          // aborted during its (endless) test phase
		minKills       = 24
	)
	// Phases of 0.8-2 s make each run span several kills.
	delay := func() int { return 800 + rnd.IntN(1201) }
	msgs := map[string]string{
		plain1: exampleMessage(delay(), delay(), delay(), ""),
		plain2: exampleMessage(delay(), delay(), delay(), ""),
		// A long test phase keeps attempt 1 open until the redispatch lands.
		redo: exampleMessage(delay(), 3000, delay(), ""),
		stop: exampleMessage(delay(), 0, delay(), "hang=forever"),
	}
	for _, id := range []string{plain1, plain2, redo, stop} {
		r.Workspace(id)
		r.AddKarviTask(id)
	}
	// karvi's briefs are sampled every 10 ms through the chaos: none may
	// ever get a shorter log (within an attempt) or an entry twice.
	watch := r.WatchSinkLogs(plain1, plain2, redo, stop)
	runs := map[string]client.WorkflowRun{}
	for _, id := range []string{plain1, redo, stop} {
		runs[id] = r.Start(testrig.Dispatch(t, id, msgs[id]))
	}
	// The second plain task starts mid-chaos, so kills also land in its
	// prepare and start stages while other tasks are in later phases.
	startPlain2At := 8 + rnd.IntN(5)
	abortAt := 12 + rnd.IntN(5)

	var kills atomic.Int64
	deadline := time.Now().Add(2 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	// Signals go out when the conductor is verifiably in the test phase, so
	// each has a run to act on; the chaos loop then kills the worker while
	// the signal is being handled.
	signalled := make(chan string, 2)
	var sigErr error
	var sigWG sync.WaitGroup
	sigWG.Add(1)
	go func() {
		defer sigWG.Done()
		// The plan names carry the workflows' nonces: looked up on every
		// tick until the run directories exist.
		redoEvents := func() string { return r.EventsPath(redo, r.PlanName(redo, 1)) }
		stopEvents := func() string { return r.EventsPath(stop, r.PlanName(stop, 1)) }
		sentRedo, sentAbort := false, false
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !sentRedo || !sentAbort {
			select {
			case <-ctx.Done():
				sigErr = fmt.Errorf("signals not sent (redispatch %v, abort %v): %w", sentRedo, sentAbort, ctx.Err())
				return
			case <-tick.C:
			}
			if !sentRedo && hasEvent(redoEvents(), "phase_start", "test") {
				if err := r.Signal(redo, taskapi.SignalRedispatch, taskapi.RedispatchSignal{Reason: "fault suite"}); err != nil {
					sigErr = fmt.Errorf("redispatch %s: %w", redo, err)
					return
				}
				sentRedo = true
				signalled <- "redispatch"
			}
			if !sentAbort && kills.Load() >= int64(abortAt) && hasEvent(stopEvents(), "phase_start", "test") {
				if err := r.Signal(stop, taskapi.SignalAbort, taskapi.AbortSignal{Reason: "fault suite"}); err != nil {
					sigErr = fmt.Errorf("abort %s: %w", stop, err)
					return
				}
				sentAbort = true
				signalled <- "abort"
			}
		}
	}()

	// The chaos loop. Each round picks how to aim the kill: at a seeded
	// random moment (150-900 ms into the worker's life), or at the next
	// brief PATCH in flight; a signal just sent preempts either. After the
	// kill the worker stays down for a seeded 0-300 ms, so the conductors
	// write while no worker runs.
	var (
		midPatch, midSignal, inPhase, restarts int
		kinds                                  = map[string]int{}
		stages                                 = map[string]int{}
		delivered                              = map[string]int{}
		signalsSent                            []string
	)
	for kills.Load() < minKills || len(signalsSent) < 2 {
		require.NoError(t, ctx.Err(), "chaos loop did not finish: kills %d, signals %v", kills.Load(), signalsSent)
		if int(kills.Load()) == startPlain2At {
			runs[plain2] = r.Start(testrig.Dispatch(t, plain2, msgs[plain2]))
		}
		kind := "random"
		// A third of the rounds aim at a PATCH, and every fourth at least,
		// so no seed goes without mid-PATCH kills.
		if rnd.IntN(3) == 0 || kills.Load()%4 == 1 {
			kind = "patch"
		}
		wait := time.Duration(150+rnd.IntN(751)) * time.Millisecond
		pause := time.Duration(rnd.IntN(301)) * time.Millisecond
		sigDelay := time.Duration(rnd.IntN(250)) * time.Millisecond
		var timer *time.Timer
		var patchArrived <-chan struct{}
		switch {
		case kills.Load() >= minKills:
			// Enough kills: only the signals' kills remain, and the
			// workflows get to reach the phases the signals wait for.
			kind = "signal"
			timer = time.NewTimer(time.Until(deadline))
		case kind == "patch":
			select { // forget an arrival from before this round
			case <-gate.arrived:
			default:
			}
			patchArrived = gate.arrived
			timer = time.NewTimer(10 * time.Second) // safety net: no PATCH came
		default:
			timer = time.NewTimer(wait)
		}
		select {
		case <-timer.C:
			if kind != "random" {
				kind += "-timeout"
			}
		case <-patchArrived:
		case s := <-signalled:
			signalsSent = append(signalsSent, s)
			kind = "signal-" + s
			midSignal++
			// Land somewhere in the handling: the workflow task, the abort
			// or drain activity, the new attempt's prepare.
			time.Sleep(sigDelay)
		}
		timer.Stop()
		if gate.inflight.Load() > 0 {
			midPatch++
		}
		for _, id := range []string{plain1, plain2, redo} { // stop's test phase never ends
			a := 1
			if _, err := os.Stat(r.EventsPath(id, r.PlanName(id, 2))); err == nil {
				a = 2
			}
			st := conductorStage(r.EventsPath(id, r.PlanName(id, a)))
			stages[st]++
			// The workflow's own progress: events it delivered to karvi.
			if b := r.Karvi.Brief(id); b != nil {
				log, _ := b["log"].([]any)
				delivered[fmt.Sprintf("a%d:%d", a, len(log))]++
			}
			if strings.HasPrefix(st, "in ") {
				inPhase++
			}
		}
		require.NoError(t, r.KillWorker())
		kills.Add(1)
		kinds[kind]++
		time.Sleep(pause) // the chaos itself: the worker is down, by design
		r.StartWorker()
		restarts++
	}
	chaosTook := time.Since(deadline.Add(-2 * time.Minute))
	t.Logf("chaos took %s: %d kills, %d restarts, aimed %v; landed mid-PATCH %d, right after a signal %d, with a conductor inside a phase %d",
		chaosTook.Round(time.Second), kills.Load(), restarts, kinds, midPatch, midSignal, inPhase)
	t.Logf("at the kills, the three finishing tasks' conductors were (task x kill): %v", stages)
	t.Logf("and their workflows had delivered (attempt:log entries, task x kill): %v", delivered)
	sigWG.Wait()
	require.NoError(t, sigErr)
	require.GreaterOrEqual(t, midPatch, 1, "no kill landed while a PATCH was in flight")
	require.Equal(t, 2, midSignal, "a kill follows each signal")

	// The last worker stays up; every workflow must now reach its end.
	res := map[string]taskapi.Result{}
	for id, run := range runs {
		res[id] = r.Result(run)
	}
	samples, grew := watch.Stop(t)
	t.Logf("karvi's briefs sampled %d times (%d saw a log grow): never shorter, never doubled", samples, grew)

	for _, id := range []string{plain1, plain2} {
		plan := r.PlanName(id, 1)
		require.EqualValues(t, "completed", res[id].Outcome.TaskStatus, id)
		require.Equal(t, 1, res[id].Attempt, id)
		require.Equal(t, testrig.ExampleBriefFor(t, id, plan), r.KarviBrief(id), "%s: brief equals the undisturbed run's", id)
		logPerEvent(t, r.KarviBrief(id), r.singleRun(id, plan))
		require.Equal(t, "completed", r.KarviStatus(id), id)
	}

	plan1, plan2 := r.PlanName(redo, 1), r.PlanName(redo, 2)
	require.EqualValues(t, "completed", res[redo].Outcome.TaskStatus)
	require.Equal(t, 2, res[redo].Attempt)
	require.Equal(t, plan2, res[redo].PlanName)
	require.Len(t, res[redo].Attempts, 2)
	require.Equal(t, "redispatched", res[redo].Attempts[0].Ended)
	require.Equal(t, testrig.ExampleBriefFor(t, redo, plan2), r.KarviBrief(redo), "redispatched brief equals an undisturbed run's")
	r.singleRun(redo, plan1)
	logPerEvent(t, r.KarviBrief(redo), r.singleRun(redo, plan2))
	require.Equal(t, "completed", r.KarviStatus(redo))

	plan := r.PlanName(stop, 1)
	require.EqualValues(t, "blocked", res[stop].Outcome.TaskStatus)
	require.Equal(t, "Plan aborted by user", res[stop].Outcome.LastError)
	require.Equal(t, r.settledBrief(stop, plan, res[stop].Outcome), r.KarviBrief(stop), "aborted brief holds exactly what the conductor wrote, settled")
	logPerEvent(t, r.KarviBrief(stop), r.singleRun(stop, plan))
	require.Equal(t, "blocked", r.KarviStatus(stop))
	task, _ := r.Karvi.Task(stop)
	require.NotNil(t, task.Blocker)
	require.Equal(t, "Plan aborted by user", task.Blocker.Reason)

	// The workflow's own brief agrees with karvi's, and each attempt has
	// exactly one run directory.
	for id, rs := range res {
		require.Equal(t, r.KarviBrief(id), testrig.Normalize(testrig.DropNulls(testrig.JSONValue(t, rs.Brief))), "%s: workflow brief vs karvi", id)
		dirs, err := filepath.Glob(filepath.Join(r.WorkRoot, "runs", id, "*"))
		require.NoError(t, err)
		require.Len(t, dirs, rs.Attempt, "%s: run directories", id)
	}
	r.AssertNoOrphans()

	// Histories cut by two dozen crashes still replay on the current code.
	for id := range res {
		require.NoError(t, testrig.Replay(r.History(id)), "replay %s", id)
	}
}

// A recorded history of a real happy run replays on the current workflow
// code, both from memory and through the SDK's JSON history format that
// workflows/register_test.go reads. FAULTS_WRITE_HISTORY=1 also writes it to
// workflows/testdata/histories/happy.json, to refresh the committed one
// after a deliberate, versioned change of the workflow.
func TestReplayRecordedHappyPath(t *testing.T) {
	r := newRig(t, testrig.Options{})
	const id = "REPLAY1"
	r.Workspace(id)
	res := r.Result(r.Start(testrig.Dispatch(t, id, "Add user authentication with JWT. "+testrig.ExampleCosts)))
	require.EqualValues(t, "completed", res.Outcome.TaskStatus)
	var got []any
	for _, b := range r.FilePatches(id) {
		got = append(got, testrig.Normalize(b))
	}
	require.Equal(t, examplePatches(t, id, res.PlanName), got, "the recorded run is example A's")
	h := r.History(id)
	require.NoError(t, testrig.Replay(h), "replay from memory")

	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "happy.json")
	if os.Getenv("FAULTS_WRITE_HISTORY") == "1" {
		path = filepath.Join("..", "workflows", "testdata", "histories", "happy.json")
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	}
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	rep := worker.NewWorkflowReplayer()
	workflows.Register(rep)
	require.NoError(t, rep.ReplayWorkflowHistoryFromJSONFile(nil, path), "replay from %s", path)
	t.Logf("history of %d events replayed (%s)", len(h.Events), path)
}
