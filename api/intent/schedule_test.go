package intentapi

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"karvi-edda-temporal/intent"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func build(t *testing.T, r intent.Request) intent.Spec {
	t.Helper()
	data, err := os.ReadFile("../../testdata/sample/dispatch.json")
	require.NoError(t, err)
	r.Target, err = intent.ParseTarget(data)
	require.NoError(t, err)
	r.Name = "nightly"
	s, err := intent.Build(r, now)
	require.NoError(t, err)
	return s
}

func TestOptionsMapTheIntentOntoTheSchedule(t *testing.T) {
	s := build(t, intent.Request{Cron: "0 2 * * *", TimeZone: "Europe/Paris", CatchUp: 3, Owner: "ana"})
	o := Options(s, "q", now)
	require.Equal(t, "karvi-intent-nightly", o.ID)
	require.Equal(t, client.ScheduleSpec{CronExpressions: []string{"0 2 * * *"}, TimeZoneName: "Europe/Paris"}, o.Spec)
	require.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL, o.Overlap)
	require.Equal(t, 3*24*time.Hour, o.CatchupWindow, "the bound times the daily gap")
	require.True(t, o.PauseOnFailure)
	a := o.Action.(*client.ScheduleWorkflowAction)
	require.Equal(t, FireWorkflowName, a.Workflow)
	require.Equal(t, "karvi-intent-nightly", a.ID)
	require.Equal(t, "q", a.TaskQueue)
	require.Equal(t, "Intent nightly: fire task T5", a.StaticSummary)
	require.Contains(t, a.StaticDetails, "Schedule intent **nightly** of ana: fires task T5 (Add user authentication with JWT.), cron 0 2 * * * in Europe/Paris")

	// The spec comes back out of the action, as Describe returns it: a
	// payload.
	p, err := converter.GetDefaultDataConverter().ToPayload(a.Args[0])
	require.NoError(t, err)
	x := &Intents{}
	back, queue, err := x.specOf(&client.ScheduleWorkflowAction{Workflow: FireWorkflowName, TaskQueue: "q", Args: []any{p}})
	require.NoError(t, err)
	require.Equal(t, "q", queue)
	require.Equal(t, s.Cron, back.Cron)
	require.Equal(t, s.Target.ID, back.Target.ID)
	require.NoError(t, back.Validate(now))

	_, _, err = x.specOf(&client.ScheduleWorkflowAction{Workflow: "TaskWorkflow", Args: []any{p}})
	require.ErrorContains(t, err, "the schedule starts TaskWorkflow, not IntentFireWorkflow")
}

func TestAOneShotIsOneCalendarSecondInUTC(t *testing.T) {
	s := build(t, intent.Request{RunAt: "2026-03-02 09:30:15", TimeZone: "Europe/Paris"})
	spec := Spec(s)
	require.Equal(t, "UTC", spec.TimeZoneName)
	require.Len(t, spec.Calendars, 1)
	c := spec.Calendars[0]
	one := func(v int) []client.ScheduleRange { return []client.ScheduleRange{{Start: v, End: v}} }
	require.Equal(t, one(15), c.Second)
	require.Equal(t, one(30), c.Minute)
	require.Equal(t, one(8), c.Hour, "09:30 in Paris is 08:30 UTC")
	require.Equal(t, one(2), c.DayOfMonth)
	require.Equal(t, one(3), c.Month)
	require.Equal(t, one(2026), c.Year)
	require.Equal(t, []client.ScheduleRange{{Start: 0, End: 6}}, c.DayOfWeek)
	require.Equal(t, intent.OnceCatchUpWindow, Policies(s, now).CatchupWindow)
}

func TestScheduleIDs(t *testing.T) {
	name, ok := NameOf(ScheduleID("nightly"))
	require.True(t, ok)
	require.Equal(t, "nightly", name)
	_, ok = NameOf("other-schedule")
	require.False(t, ok)
}
