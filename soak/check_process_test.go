package soak

import (
	"testing"
	"time"
)

const (
	planA1 = "karvi-a-r1-0badcafe"
	planA2 = "karvi-a-r2-0badcafe"
)

func TestCheckConductorKeptWhileWanted(t *testing.T) {
	cfg := Config{Grace: 5 * time.Second, Stale: 3 * time.Second}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{
			name: "the fence stops an earlier attempt's conductor",
			o: Observed{
				Samples:    []Sample{sample(10, nil, running("a", 2, planA2, "test"))},
				FenceStops: []FenceStop{{At: at(10.5), Task: "a", Plan: planA1}},
			},
		},
		{
			name: "the fence stops a closed task's conductor",
			o: Observed{
				Samples:    []Sample{sample(10, nil, closed("a", 1, planA1))},
				FenceStops: []FenceStop{{At: at(11), Task: "a", Plan: planA1}},
			},
		},
		{
			name: "the sample before was late: the next shows another attempt",
			o: Observed{
				Samples: []Sample{
					sample(10, nil, running("a", 1, planA1, "test")),
					sample(11, nil, running("a", 2, planA2, "implement")),
				},
				FenceStops: []FenceStop{{At: at(10.5), Task: "a", Plan: planA1}},
			},
		},
		{
			name: "the workflow's record shows the attempt ended before the stop",
			o: Observed{
				Samples:    []Sample{sample(10, nil, running("a", 1, planA1, "test"))},
				FenceStops: []FenceStop{{At: at(10.5), Task: "a", Plan: planA1}},
				Tasks: []TaskObs{{ID: "a", Workflow: &WorkflowObs{Closed: true, Attempts: []AttemptSummary{
					{Attempt: 1, PlanName: planA1, Ended: "redispatched", EndedAt: at(10.2)}}}}},
			},
		},
		{
			name: "no status fresh enough to judge by",
			o: Observed{
				Samples:    []Sample{sample(1, nil, running("a", 1, planA1, "test"))},
				FenceStops: []FenceStop{{At: at(10), Task: "a", Plan: planA1 + "-resume-1"}},
			},
		},
		{
			// The fence judged a resumed conductor's run directory foreign
			// and stopped it while the attempt ran on; the task then ended
			// blocked.
			name: "the fence stops a resumed conductor of the running attempt",
			o: Observed{
				Samples: []Sample{
					sample(10, []LiveConductor{live("a", planA1+"-resume-1", 4242)}, running("a", 1, planA1, "test")),
					sample(12, nil, closed("a", 1, planA1)),
				},
				FenceStops: []FenceStop{{At: at(11), Host: "h1", Task: "a", Plan: planA1 + "-resume-1",
					Why: "the task's workflow is at attempt 1 (plan " + planA1 + ")"}},
			},
			want: []want{{InvConductorKeptWhileWanted, "a", []string{
				"runs/a/" + planA1 + "-resume-1", "host h1", "running at attempt 1", "phase test", "14:00:10.000", "closed"}}},
		},
		{
			name: "the fence on another host stops a copy of the current attempt",
			o: Observed{
				Samples: []Sample{sample(10, nil, func() TaskSample {
					s := running("a", 2, planA2, "docs")
					s.Host = "h2"
					return s
				}())},
				FenceStops: []FenceStop{{At: at(10.1), Host: "h1", Task: "a", Plan: planA2}},
			},
		},
		{
			name: "the fence stops the current attempt's conductor on its own host",
			o: Observed{
				Samples: []Sample{sample(10, nil, func() TaskSample {
					s := running("a", 2, planA2, "docs")
					s.Host = "h1"
					return s
				}())},
				FenceStops: []FenceStop{{At: at(10.1), Host: "h1", Task: "a", Plan: planA2}},
			},
			want: []want{{InvConductorKeptWhileWanted, "a", []string{"host h1"}}},
		},
		{
			name: "the fence stops the current attempt's conductor",
			o: Observed{
				Samples:    []Sample{sample(10, nil, running("a", 2, planA2, "docs"))},
				FenceStops: []FenceStop{{At: at(10.1), Task: "a", Plan: planA2}},
			},
			want: []want{{InvConductorKeptWhileWanted, "a", []string{planA2, "attempt 2", "no later sample"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, CheckConductorKeptWhileWanted(&tc.o, cfg), tc.want...)
		})
	}
}

func TestCheckStoppedTaskEnds(t *testing.T) {
	blocked := func(err string) TaskObs {
		return TaskObs{ID: "a", Run: "r", Workflow: &WorkflowObs{Closed: true, Outcome: "blocked", OutcomeError: err, Attempt: 1, PlanName: planA1}}
	}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "a check failure", o: Observed{Tasks: []TaskObs{blocked("check failed: cmd `go test` exited 1")}}},
		{name: "a crash the mix injected", o: Observed{
			Tasks:   []TaskObs{blocked("Phase test agent crashed: conductor shutdown")},
			Journal: []Record{{At: at(1), Kind: RecFault, Task: "a", Details: map[string]string{"fault": "crash"}}},
		}},
		{
			// The fence stopped the resumed conductor of a task paused at
			// a usage limit; the limit the mix injected does not explain
			// the end.
			name: "a usage limit is no cause",
			o: Observed{
				Tasks: []TaskObs{blocked("Phase test agent crashed: conductor shutdown")},
				Journal: []Record{{At: at(1), Kind: RecFault, Task: "a", Details: map[string]string{"fault": "usage-limit", "phase": "test"}},
					{At: at(1), Kind: RecResume, Task: "a"}},
			},
			want: []want{{InvConductorKeptWhileWanted, "a", []string{"conductor shutdown"}}},
		},
		{name: "its run was aborted", o: Observed{
			Tasks:   []TaskObs{blocked("Phase test agent crashed: conductor shutdown")},
			Journal: []Record{{At: at(1), Kind: RecAbort, Run: "r"}},
		}},
		{name: "a conductor shutdown nothing explains", o: Observed{
			Tasks:   []TaskObs{blocked("Phase test agent crashed: conductor shutdown")},
			Journal: []Record{{At: at(1), Kind: RecFault, Task: "b"}, {At: at(1), Kind: RecAbort, Run: "other"}},
		}, want: []want{{InvConductorKeptWhileWanted, "a", []string{"attempt 1", planA1, "conductor shutdown"}}}},
		{name: "a stale check error after the workspace went", o: Observed{
			Tasks: []TaskObs{blocked("git status failed: fatal: not a git repository")},
		}, want: []want{{InvConductorKeptWhileWanted, "a", []string{"not a git repository"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckStoppedTaskEnds(&tc.o, Config{}), tc.want...) })
	}
}

func TestCheckOneConductorPerAttempt(t *testing.T) {
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "one per attempt, two tasks", o: Observed{Samples: []Sample{
			sample(1, []LiveConductor{live("a", planA1, 10), live("b", "karvi-b-r1-1", 11)}),
		}}},
		{name: "a resume after its first run ended", o: Observed{Samples: []Sample{
			sample(1, []LiveConductor{live("a", planA1, 10)}),
			sample(2, []LiveConductor{live("a", planA1+"-resume-1", 12)}),
		}}},
		{name: "a resume while the paused conductor lives", o: Observed{Samples: []Sample{
			sample(1, []LiveConductor{live("a", planA1, 10)}),
			sample(2, []LiveConductor{live("a", planA1+"-resume-1", 12), live("a", planA1, 10)}),
			sample(3, []LiveConductor{live("a", planA1, 10), live("a", planA1+"-resume-1", 12)}),
			sample(4, []LiveConductor{live("a", planA1, 10), live("a", planA1+"-resume-1", 12)}),
			sample(5, []LiveConductor{live("a", planA1+"-resume-1", 12)}),
		}}, want: []want{{InvOneConductorPerAttempt, "a", []string{
			"attempt " + planA1 + " had 2 live conductors", "pgid 10", "pgid 12", "3 samples", "14:00:02.000", "14:00:04.000"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckOneConductorPerAttempt(&tc.o, Config{}), tc.want...) })
	}
}

// planNext is a plan of a later workflow chain of task a.
const planNext = "karvi-a-r1-feedbeef"

func TestCheckNoProcessOutlivesAttempt(t *testing.T) {
	cfg := Config{Grace: 3 * time.Second, Stale: 2 * time.Second}
	c1 := []LiveConductor{live("a", planA1, 10)}
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "alive while wanted", o: Observed{Samples: []Sample{
			sample(1, c1, running("a", 1, planA1, "x")), sample(10, c1, running("a", 1, planA1, "x")),
		}}},
		{name: "alive after the close, within the grace", o: Observed{Samples: []Sample{
			sample(1, c1, closed("a", 1, planA1)), sample(3.5, c1), sample(4, nil),
		}}},
		{name: "no fresh status of an open task", o: Observed{Samples: []Sample{
			sample(1, c1, running("a", 2, planA2, "x")), sample(10, c1),
		}}},
		{name: "alive long after the workflow closed", o: Observed{Samples: []Sample{
			sample(1, c1, running("a", 1, planA1, "x")),
			sample(2, c1, closed("a", 1, planA1)),
			sample(4, c1), sample(5.5, c1), sample(9, c1),
		}}, want: []want{{InvNoProcessOutlivesAttempt, "a", []string{
			"runs/a/" + planA1, "pgid 10", "14:00:05.500", "3.5s", "closed"}}}},
		{name: "an earlier attempt alive while the next one runs", o: Observed{Samples: []Sample{
			sample(1, c1, running("a", 2, planA2, "x")),
			sample(2, c1, running("a", 2, planA2, "x")),
			sample(5, c1, running("a", 2, planA2, "x")),
		}}, want: []want{{InvNoProcessOutlivesAttempt, "a", []string{planA1, "running at attempt 2 (plan " + planA2}}}},
		{
			// A send-back's new workflow started a conductor after the
			// last workflow closed; the task's next status, naming the
			// new chain, had not come yet.
			name: "a later chain's conductor before its status came",
			o: Observed{Samples: []Sample{
				sample(1, nil, closed("a", 1, planA1)),
				sample(5, []LiveConductor{live("a", planNext, 11)}),
				sample(9, []LiveConductor{live("a", planNext, 11)}),
				sample(12, []LiveConductor{live("a", planNext, 11)}),
			}},
		},
		{
			name: "a conductor that appeared after its workflow closed, and lives on",
			o: Observed{Samples: []Sample{
				sample(1, nil, closed("a", 1, planA1)),
				sample(5, []LiveConductor{live("a", planNext, 11)}),
				sample(6, []LiveConductor{live("a", planNext, 11)}, closed("a", 1, planA1)),
				sample(12, []LiveConductor{live("a", planNext, 11)}),
			}},
			want: []want{{InvNoProcessOutlivesAttempt, "a", []string{"runs/a/" + planNext, "still alive at 14:00:12.000, 6s after", "at 14:00:06.000 the workflow was closed"}}},
		},
		{name: "alive through a pause", o: Observed{Samples: []Sample{
			sample(1, c1, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(0.5)})),
			sample(2, c1, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(0.5)})),
			sample(6, c1, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(0.5)})),
		}}, want: []want{{InvNoProcessOutlivesAttempt, "a", []string{"paused (usage_limit)"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckNoProcessOutlivesAttempt(&tc.o, cfg), tc.want...) })
	}
}

func TestCheckNothingLeftRunning(t *testing.T) {
	expect(t, CheckNothingLeftRunning(&Observed{End: at(60)}, Config{}))
	o := Observed{End: at(60), Leftovers: []Process{
		{PID: 300, PGID: 300, What: "worker", Cmd: "bin/worker -host h2"},
		{PID: 200, PGID: 199, What: "agent", Task: "a", Dir: planA1},
	}}
	expect(t, CheckNothingLeftRunning(&o, Config{}),
		want{InvNothingLeftRunning, "a", []string{"agent pid 200 (pgid 199) of runs/a/" + planA1}},
		want{InvNothingLeftRunning, "", []string{"worker pid 300", "bin/worker -host h2"}})
}
