package intentapi

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/intent"
)

// Overlap is every intent's overlap policy. Each fire lasts as long as its
// target, so the schedule must hold later fires back rather than start
// them beside it; BUFFER_ALL keeps every fire it admits, one after
// another, and the fire itself decides when it starts (intent.Admit): one
// due while an earlier fire was busy is skipped (what SKIP would do), one
// of a backlog runs if it is among the newest CatchUp. SKIP could not
// catch up more than one missed fire, since the first would be running
// when the others are considered.
const Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL

// Spec is the schedule spec of an intent: its cron in its time zone, or
// its one instant as a calendar in UTC.
func Spec(s intent.Spec) client.ScheduleSpec {
	if s.RunAt.IsZero() {
		return client.ScheduleSpec{CronExpressions: []string{s.Cron}, TimeZoneName: s.TimeZone}
	}
	at := s.RunAt.UTC()
	one := func(v int) []client.ScheduleRange { return []client.ScheduleRange{{Start: v, End: v}} }
	return client.ScheduleSpec{
		Calendars: []client.ScheduleCalendarSpec{{
			Second: one(at.Second()), Minute: one(at.Minute()), Hour: one(at.Hour()),
			DayOfMonth: one(at.Day()), Month: one(int(at.Month())), Year: one(at.Year()),
			DayOfWeek: []client.ScheduleRange{{Start: 0, End: 6}},
			Comment:   "once, " + s.When(),
		}},
		TimeZoneName: "UTC",
	}
}

// Policies are an intent's schedule policies: the overlap policy above;
// the catch-up window the intent's bound asks for (the bound times the
// spec's shortest gap, see intent.Spec.CatchUpWindow); and pause on
// failure, a backstop for a fire workflow that fails outright (a fire
// records its target's failures in the intent's state and does not fail).
func Policies(s intent.Spec, now time.Time) client.SchedulePolicies {
	return client.SchedulePolicies{
		Overlap:        Overlap,
		CatchupWindow:  s.CatchUpWindow(now),
		PauseOnFailure: true,
	}
}

// Action starts the fire workflow with the intent's spec.
func Action(s intent.Spec, taskQueue string) *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:            ScheduleID(s.Name),
		Workflow:      FireWorkflowName,
		Args:          []any{FireInput{Intent: s}},
		TaskQueue:     taskQueue,
		StaticSummary: fmt.Sprintf("Intent %s: fire %s", s.Name, s.Target),
		StaticDetails: Details(s),
	}
}

// Details describe an intent for the Web UI.
func Details(s intent.Spec) string {
	d := fmt.Sprintf("Schedule intent **%s** of %s: fires %s", s.Name, s.Owner, s.Target)
	if s.Target.Title != "" {
		d += fmt.Sprintf(" (%s)", s.Target.Title)
	}
	d += fmt.Sprintf(", %s", s.When())
	if s.RunAt.IsZero() {
		d += " in " + s.TimeZone
	}
	d += fmt.Sprintf(".\n\nmax_runs %d · catch_up %d (%s) · max_errors %d · min_interval %s",
		s.MaxRuns, s.CatchUp, s.Overflow, s.MaxErrors, s.MinInterval.D())
	if s.Until != nil {
		d += " · until " + s.Until.String()
	}
	return d
}

// Options create an intent's schedule, active.
func Options(s intent.Spec, taskQueue string, now time.Time) client.ScheduleOptions {
	p := Policies(s, now)
	return client.ScheduleOptions{
		ID:             ScheduleID(s.Name),
		Spec:           Spec(s),
		Action:         Action(s, taskQueue),
		Overlap:        p.Overlap,
		CatchupWindow:  p.CatchupWindow,
		PauseOnFailure: p.PauseOnFailure,
	}
}
