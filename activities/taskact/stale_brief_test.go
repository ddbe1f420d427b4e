package taskact

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/sink"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/karvifake"
)

// An earlier workflow's brief for the task (from another host, or karvi's
// own dispatch): a finished plan with another phase, its costs, errors and
// current phase.
const earlierBrief = `{
 "meta": {"boardType": "brief", "version": 1, "taskId": "T5", "runtime": "edda"},
 "plan": {"source": "generated", "name": "karvi-t5-old", "totalPhases": 4, "budget_usd": 3},
 "phases": {
  "implement": {"status": "passed", "attempts": 1, "duration_ms": 119000, "cost_usd": 0.85,
   "startedAt": "2026-01-01T00:00:00Z", "completedAt": "2026-01-01T00:02:00Z"},
  "test": {"status": "failed", "attempts": 3, "error": "cmd cargo test exited 1"},
  "docs": {"status": "skipped", "reason": "not needed"},
  "lint": {"status": "passed", "cost_usd": 0.05}
 },
 "currentPhase": "docs",
 "completedPhases": 3,
 "cost": {"total_usd": 1.45, "by_phase": {"implement": 0.85, "lint": 0.05}},
 "artifacts": ["old.txt"],
 "log": [{"time": "2026-01-01T00:00:00Z", "agent": "conductor", "action": "plan_start", "detail": "4 phases"}]
}`

// A first attempt whose task already has a brief in karvi replaces it
// whole: karvi merges a PATCH into what it holds and cannot delete keys,
// so the skeleton must null every field the earlier brief set, and the
// phases this plan does not have. What karvi then holds is exactly this
// attempt's brief, so a resumed delivery matches it.
func TestFirstSkeletonReplacesAnEarlierBrief(t *testing.T) {
	fake := karvifake.New(karvifake.Options{})
	url, err := fake.Start()
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(earlierBrief)}))
	cl, err := karvi.New(url, "")
	require.NoError(t, err)
	a, env, _ := fenceActivities(t, "h1")
	a.Sink = sink.NewKarvi(cl)

	res := startAttempt(t, env, a, 1)
	require.NotNil(t, res.Delivery)
	require.Empty(t, res.SinkProblem)
	held := fake.Brief("T5")
	require.True(t, mapping.SinkHolds(held, &res.Delivery.Brief.Brief),
		"karvi holds more than this attempt's brief: %v", held)
	phases := held["phases"].(map[string]any)
	require.Nil(t, phases["lint"], "a phase of the earlier plan stays")
	require.NotEqual(t, "docs", held["currentPhase"], "the earlier current phase stays")
	cost := held["cost"].(map[string]any)
	require.Nil(t, cost["total_usd"], "the earlier total stays")
}

// The same first attempt while karvi is congested (its rate limit's
// bucket more than half spent): the skeleton replaces the earlier brief
// whole with one PUT, instead of a read and a PATCH that nulls what the
// earlier brief set. karvi then holds exactly this attempt's brief.
func TestFirstSkeletonReplacesAnEarlierBriefWhenCongested(t *testing.T) {
	fake := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	url, err := fake.Start()
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(earlierBrief)}))
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "OTHER", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{}`)}))
	cl, err := karvi.New(url, "", karvi.WithRateLimit(60))
	require.NoError(t, err)
	// Another task's writes spend more than half the bucket.
	spendBucket(t, cl)
	a, env, _ := fenceActivities(t, "h1")
	a.Sink = sink.NewKarvi(cl)

	res := startAttempt(t, env, a, 1)
	require.NotNil(t, res.Delivery)
	require.Empty(t, res.SinkProblem)
	routes := fake.TaskStats("T5").Routes
	require.Zero(t, routes["GET /api/brief/:id"], "the brief was read: %v", routes)
	require.Equal(t, 1, routes["PUT /api/brief/:id"], "the skeleton is one PUT: %v", routes)
	require.Equal(t, "PUT", firstBriefWrite(t, fake.Writes("T5")).Method, "the skeleton goes first")
	held := fake.Brief("T5")
	require.True(t, mapping.SinkHolds(held, &res.Delivery.Brief.Brief),
		"karvi holds more than this attempt's brief: %v", held)
	phases := held["phases"].(map[string]any)
	require.Nil(t, phases["lint"], "a phase of the earlier plan stays")
	require.NotEqual(t, "docs", held["currentPhase"], "the earlier current phase stays")
}

// A first attempt that starts while karvi is congested holds its skeleton
// like the patches that wait their turn: the skeleton and the events that
// follow reach karvi as one PUT at the checkpoint, not a PUT and a PATCH,
// and karvi then holds exactly the brief the checkpoint reports.
func TestCongestedStartSendsSkeletonAndEventsInOneWrite(t *testing.T) {
	fake := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	url, err := fake.Start()
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(earlierBrief)}))
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "OTHER", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{}`)}))
	cl, err := karvi.New(url, "", karvi.WithRateLimit(60))
	require.NoError(t, err)
	spendBucket(t, cl)
	a, env, _ := fenceActivities(t, "h1")
	a.Sink = sink.NewKarvi(cl)

	// The first checkpoint comes once the conductor's phase_start was
	// delivered (the wait without events is long, the one after short).
	v, err := env.ExecuteActivity(a.StartAttempt, StartAttemptRequest{Dispatch: exampleDispatch(t), Attempt: 1,
		MaxWait: time.Minute, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	var res StartAttemptResult
	require.NoError(t, v.Get(&res))
	require.NotNil(t, res.Delivery)
	require.Equal(t, 1, res.Delivery.Events, "the conductor's phase_start")
	require.Equal(t, 2, res.Delivery.Patches, "the skeleton and phase_start, acknowledged")
	routes := fake.TaskStats("T5").Routes
	require.Equal(t, 1, routes["PUT /api/brief/:id"], "%v", routes)
	require.Zero(t, routes["PATCH /api/brief/:id"], "the skeleton and the event went apart: %v", routes)
	require.Zero(t, routes["GET /api/brief/:id"], "%v", routes)
	task, _ := fake.Task("T5")
	require.Equal(t, "in_progress", task.Status)
	held := fake.Brief("T5")
	require.True(t, mapping.SinkHolds(held, &res.Delivery.Brief.Brief),
		"karvi holds another brief than the checkpoint's: %v", held)
	require.Nil(t, held["phases"].(map[string]any)["lint"], "a phase of the earlier plan stays")
}

// While its skeleton waits its turn (karvi congested), an attempt's first
// checkpoint comes no sooner than an ordinary one, so that the events of a
// short first phase join the skeleton in one write instead of the skeleton
// leaving alone at a first checkpoint a moment after the first event.
func TestCongestedStartDefersItsFirstCheckpoint(t *testing.T) {
	fake := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	url, err := fake.Start()
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T5", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{}`)}))
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "OTHER", Status: "dispatched", BriefPath: true,
		Brief: json.RawMessage(`{}`)}))
	cl, err := karvi.New(url, "", karvi.WithRateLimit(60))
	require.NoError(t, err)
	spendBucket(t, cl)
	a, env, _ := fenceActivities(t, "h1")
	a.Sink = sink.NewKarvi(cl)
	layout, err := activities.NewLayout(a.Config.WorkRoot)
	require.NoError(t, err)
	cwd, err := layout.TaskCwd(exampleDispatch(t))
	require.NoError(t, err)
	// Once phase_start was delivered (the task is in_progress), the
	// conductor's phase passes.
	go func() {
		for {
			if task, _ := fake.Task("T5"); task.Status == "in_progress" {
				_ = os.WriteFile(filepath.Join(cwd, "gate"), nil, 0o644)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	v, err := env.ExecuteActivity(a.StartAttempt, StartAttemptRequest{Dispatch: exampleDispatch(t), Attempt: 1,
		MaxWait: time.Minute, CheckpointEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	var res StartAttemptResult
	require.NoError(t, v.Get(&res))
	require.NotNil(t, res.Delivery)
	require.Equal(t, 2, res.Delivery.Events, "the first checkpoint came before the phase passed")
	routes := fake.TaskStats("T5").Routes
	require.Equal(t, 1, routes["PUT /api/brief/:id"], "%v", routes)
	require.Zero(t, routes["PATCH /api/brief/:id"], "%v", routes)
}

// spendBucket has another task's brief writes spend most of cl's bucket
// (60 a minute: a bucket of 54 locally, refilled at under 1 a second), so
// that cl stays congested for the rest of the test whatever the pace of
// its requests.
func spendBucket(t *testing.T, cl *karvi.Client) {
	t.Helper()
	for range 50 {
		require.NoError(t, cl.PatchBrief(t.Context(), "OTHER", json.RawMessage(`{"a":1}`)))
	}
	require.True(t, cl.Congested())
}

// firstBriefWrite is the first write of a task's brief. A status write is
// not one: while karvi is congested it goes ahead of brief writes (on a
// slow machine it does, on a fast one the skeleton may leave first).
func firstBriefWrite(t *testing.T, writes []karvifake.Write) karvifake.Write {
	t.Helper()
	for _, w := range writes {
		if strings.HasPrefix(w.Path, "/api/brief/") {
			return w
		}
	}
	t.Fatalf("no brief write among %v", writes)
	return karvifake.Write{}
}
