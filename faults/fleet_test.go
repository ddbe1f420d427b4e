//go:build realserver

package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/temporalproto"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/testrig"
)

// A fleet of three hosts (hosts_test.go) on one task queue: each task's
// attempt starts on whichever host takes it, and every later activity of
// it (each delivery of its events) runs on that host, the only one that
// can see its conductor. All complete as an undisturbed single-worker run
// would.
func TestFleetRunsEachTaskOnItsHost(t *testing.T) {
	names := []string{"h1", "h2", "h3"}
	f := newFleet(t, names, nil)
	for _, name := range names {
		f.hosts[name].start()
	}
	ids := taskIDs("SPREAD", 30)
	f.workspaces(ids...)
	for _, id := range ids {
		// Longer than an attempt's first checkpoint (a second, up to five
		// while karvi is congested and the skeleton is held), so that
		// deliveries follow the start.
		f.start(id, exampleMessage(2000, 2000, 2000, ""), time.Minute)
	}
	perHost := map[string]int{}
	onHost := 0
	for _, id := range ids {
		res := f.result(id)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %v", id, theirPlans(res))
		require.Len(t, res.Attempts, 1, "%s: %v", id, theirPlans(res))
		a := res.Attempts[0]
		perHost[a.Host]++
		n := f.routedToHosts(id, res)
		require.NotZero(t, n, "%s: no delivery followed its start", id)
		onHost += n
		evs := f.ranOnce(id, a)
		require.Equal(t, testrig.ExampleBriefFor(t, id, a.PlanName), f.KarviBrief(id), "%s: brief equals the undisturbed run's", id)
		logPerEvent(t, f.KarviBrief(id), evs)
		require.Equal(t, "completed", f.KarviStatus(id), id)
	}
	t.Logf("tasks per host %v; %d activities went to their host's queue", perHost, onHost)
	require.Len(t, perHost, len(names), "every host took tasks: %v", perHost)
}

// Every worker of the fleet is stopped (SIGTERM) and started again, one
// host after the other, twice, while 12 tasks run: a stopping worker
// hands its deliveries back and leaves its conductors running, the new
// worker of the same host re-attaches to them, and the tasks end as an
// undisturbed run does: the same briefs, every event delivered once, one
// conductor per attempt, no attempt lost or started twice.
func TestRollingRestartLosesNothing(t *testing.T) {
	names := []string{"h1", "h2", "h3"}
	f := newFleet(t, names, nil)
	for _, name := range names {
		f.hosts[name].start()
	}
	ids := taskIDs("ROLL", 12)
	f.workspaces(ids...)
	for _, id := range ids {
		f.start(id, exampleMessage(3000, 3000, 3000, ""), time.Minute)
	}
	watch := f.WatchSinkLogs(ids...)
	for _, id := range ids {
		f.WaitFor(id, "the attempt running on its host", func(s taskapi.Status) bool {
			return s.Stage == taskapi.StageRunning && s.Host != ""
		})
	}
	restarts := 0
	var unfinished []int
	for range 2 {
		for _, name := range names {
			n := 0
			for _, id := range ids {
				if f.KarviStatus(id) != "completed" {
					n++
				}
			}
			unfinished = append(unfinished, n)
			f.hosts[name].stop()
			f.hosts[name].start()
			restarts++
		}
	}
	t.Logf("%d restarts; tasks not yet completed at each: %v", restarts, unfinished)
	require.Equal(t, len(ids), unfinished[0], "the restarts began with every task running")

	for _, id := range ids {
		res := f.result(id)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %v", id, theirPlans(res))
		require.Len(t, res.Attempts, 1, "%s: no attempt lost: %v", id, theirPlans(res))
		a := res.Attempts[0]
		f.routedToHosts(id, res)
		evs := f.ranOnce(id, a)
		require.Equal(t, testrig.ExampleBriefFor(t, id, a.PlanName), f.KarviBrief(id), "%s: brief equals the undisturbed run's", id)
		logPerEvent(t, f.KarviBrief(id), evs)
	}
	samples, grew := watch.Stop(t)
	t.Logf("karvi's briefs sampled %d times (%d saw a log grow): never shorter, never doubled", samples, grew)
}

// A host lost with everything on it (its pid namespace killed: worker,
// conductors, agents) loses its tasks' attempts once the grace is over;
// each of those tasks starts anew on another host and completes there,
// its status telling which host was lost during which phase.
func TestHostLossMovesItsTasksElsewhere(t *testing.T) {
	names := []string{"h1", "h2", "h3"}
	f := newFleet(t, names, nil)
	for _, name := range names {
		f.hosts[name].start()
	}
	ids := taskIDs("LOSS", 9)
	f.workspaces(ids...)
	const grace = 3 * time.Second
	// A long test phase keeps every task running until the host is lost,
	// however long the nine take to start on a slow server.
	for _, id := range ids {
		f.start(id, exampleMessage(1500, 8000, 1500, ""), grace)
	}
	// The host running the most tasks is lost.
	perHost := map[string][]string{}
	for _, id := range ids {
		s := f.WaitFor(id, "the attempt running on its host", func(s taskapi.Status) bool {
			return s.Stage == taskapi.StageRunning && s.Host != ""
		})
		perHost[s.Host] = append(perHost[s.Host], id)
	}
	victim := ""
	for name, tasks := range perHost {
		if victim == "" || len(tasks) > len(perHost[victim]) {
			victim = name
		}
	}
	lostAt := time.Now()
	f.hosts[victim].lose()
	t.Logf("host %s lost with tasks %v (all: %v)", victim, perHost[victim], perHost)

	moved := map[string]bool{}
	for _, id := range perHost[victim] {
		moved[id] = true
	}
	for _, id := range ids {
		res := f.result(id)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %v", id, theirPlans(res))
		f.routedToHosts(id, res)
		last := res.Attempts[len(res.Attempts)-1]
		require.NotEqual(t, victim, last.Host, "%s completed on the lost host", id)
		if !moved[id] {
			require.Len(t, res.Attempts, 1, "%s: %v", id, theirPlans(res))
		} else {
			require.Len(t, res.Attempts, 2, "%s: %v", id, theirPlans(res))
			lost := res.Attempts[0]
			require.Equal(t, taskapi.EndedHostLost, lost.Ended, id)
			require.Equal(t, victim, lost.Host, id)
			require.True(t, strings.HasPrefix(lost.LastError, "host "+victim+" lost during phase "), "%s: %q", id, lost.LastError)
			s, err := f.Status(id)
			require.NoError(t, err)
			require.Equal(t, lost.LastError, s.Attempts[0].LastError, "%s: the status tells the loss", id)
			// What the lost conductor wrote, it wrote alone.
			oneWriter(t, lost.PlanName, testrig.ReadJSONL(t, f.eventsOn(victim, id, lost.PlanName)))
		}
		evs := f.ranOnce(id, last)
		require.Equal(t, testrig.ExampleBriefFor(t, id, last.PlanName), f.KarviBrief(id), "%s: brief equals an undisturbed run's", id)
		logPerEvent(t, f.KarviBrief(id), evs)
		require.Equal(t, "completed", f.KarviStatus(id), id)
	}
	t.Logf("every task completed %s after the loss (grace %s)", time.Since(lostAt).Round(time.Second), grace)

	// Histories with a host lost replay on the current code. One of them
	// is kept for workflows/register_test.go (FAULTS_WRITE_HISTORY=1 rewrites
	// it), so later changes are proven against the host-queue path too.
	for _, id := range ids {
		require.NoError(t, testrig.Replay(f.History(id)), "replay %s", id)
	}
	if os.Getenv("FAULTS_WRITE_HISTORY") == "1" {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(f.History(perHost[victim][0]))
		require.NoError(t, err)
		path := filepath.Join("..", "workflows", "testdata", "histories", "fleet-host-lost.json")
		require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o644))
	}
}

// A host whose worker died while its conductors ran on (the machine cut
// off, say) loses its tasks to another host; when its worker returns, it
// stops those conductors instead of re-attaching to them: their attempts
// are no longer their tasks' current ones.
func TestReturningHostStopsTheConductorsItLost(t *testing.T) {
	// Every agent on h2 hangs, so its conductors are still running when
	// h2 comes back, whatever the timing.
	f := newFleet(t, []string{"h1", "h2"}, map[string][]string{"h2": {"EDDASIM_SCENARIO=hang=forever"}})
	h1, h2 := f.hosts["h1"], f.hosts["h2"]
	h2.start()
	ids := taskIDs("ORPHAN", 2)
	f.workspaces(ids...)
	for _, id := range ids {
		f.start(id, exampleMessage(200, 200, 200, ""), 3*time.Second)
	}
	for _, id := range ids {
		f.WaitFor(id, "the attempt running on h2", func(s taskapi.Status) bool {
			return s.Stage == taskapi.StageRunning && s.Host == "h2"
		})
	}
	h2.kill()
	h1.start()
	for _, id := range ids {
		res := f.result(id)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %v", id, theirPlans(res))
		require.Len(t, res.Attempts, 2, "%s: %v", id, theirPlans(res))
		require.Equal(t, taskapi.EndedHostLost, res.Attempts[0].Ended, id)
		require.Equal(t, "h2", res.Attempts[0].Host, id)
		require.Equal(t, "h1", res.Attempts[1].Host, id)
		f.routedToHosts(id, res)
		f.ranOnce(id, res.Attempts[1])
		require.Equal(t, testrig.ExampleBriefFor(t, id, res.PlanName), f.KarviBrief(id), id)
	}
	orphans, err := testrig.RunProcesses(h2.root)
	require.NoError(t, err)
	require.NotEmpty(t, orphans, "h2's conductors run on without their worker")

	back := h2.start()
	// The worker says when its sweep is done, having stopped them.
	swept := back.waitLog(t, `msg="fence: live conductors swept"`)
	require.Contains(t, swept, fmt.Sprintf("stopped=%d", len(ids)))
	log, err := os.ReadFile(back.log)
	require.NoError(t, err)
	require.Equal(t, len(ids), strings.Count(string(log), "fence: stopped a conductor its workflow gave up"), "h2's worker says what it stopped")
	left, err := testrig.RunProcesses(h2.root)
	require.NoError(t, err)
	require.Empty(t, left, "h2's orphaned conductors still run")
	for _, id := range ids {
		res := f.result(id)
		plan := res.Attempts[0].PlanName
		for _, ev := range testrig.ReadJSONL(t, f.eventsOn("h2", id, plan)) {
			require.NotContains(t, []string{"phase_passed", "plan_completed"}, ev["type"], "%s: the orphan hung until it was stopped", id)
		}
		// The stop is recorded in the run directory, for whoever reports
		// that run's end.
		data, err := os.ReadFile(filepath.Join(h2.root, "runs", id, plan, "stopped-by.json"))
		require.NoError(t, err, "%s: the fence's stop is recorded", id)
		var stop mapping.RuntimeStop
		require.NoError(t, json.Unmarshal(data, &stop))
		require.Equal(t, mapping.StopBySweep, stop.By, id)
		require.Equal(t, "h2", stop.Host, id)
		require.Equal(t, fmt.Sprintf("the task's workflow is at attempt 2 (plan %s)", res.PlanName), stop.Why, id)
	}
}

func taskIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return ids
}

// A host with one activity slot (-max-activities 1) under a backlog of
// starts carries one task at a time: the conductors' own logs (first and
// last event) never overlap, and no task's host is taken for lost while
// it runs (each completes in one attempt). The starts that find it full
// are handed back and taken again once it has room.
func TestAOneSlotHostNeverRunsTwoConductors(t *testing.T) {
	f := newFleet(t, []string{"h1"}, map[string][]string{"h1": {"KARVI_EDDA_MAX_ACTIVITIES=1"}})
	f.hosts["h1"].start()
	ids := taskIDs("ONESLOT", 4)
	f.workspaces(ids...)
	for _, id := range ids {
		f.start(id, exampleMessage(600, 600, 600, ""), 30*time.Second)
	}
	type span struct {
		id         string
		start, end time.Time
	}
	var spans []span
	for _, id := range ids {
		res := f.result(id)
		require.EqualValues(t, "completed", res.Outcome.TaskStatus, "%s: %v", id, theirPlans(res))
		require.Len(t, res.Attempts, 1, "%s: no host-lost while the host is alive: %v", id, theirPlans(res))
		data, err := os.ReadFile(f.eventsOn("h1", id, res.Attempts[0].PlanName))
		require.NoError(t, err)
		var sp span
		sp.id = id
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var ev struct{ TS time.Time }
			require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
			if sp.start.IsZero() {
				sp.start = ev.TS
			}
			sp.end = ev.TS
		}
		spans = append(spans, sp)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		require.False(t, spans[i].start.Before(spans[i-1].end),
			"%s's conductor ran from %s while %s's ran until %s, on a 1-slot host",
			spans[i].id, spans[i].start.Format(time.StampMilli), spans[i-1].id, spans[i-1].end.Format(time.StampMilli))
	}
}
