package soak

import (
	"testing"
)

func TestCheckUsageLimitPauses(t *testing.T) {
	lim := Pause{Reason: PauseUsageLimit, Since: at(10), Until: at(71), ResetAt: at(70), Count: 1}
	p := func(s float64) Sample { return sample(s, nil, paused("a", 1, planA1, lim)) }
	r := func(s float64) Sample { return sample(s, nil, running("a", 1, planA1, "test")) }
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "resumes after the reset", o: Observed{Samples: []Sample{r(5), p(11), p(40), p(69), r(72)}}},
		{name: "still paused at the end", o: Observed{Samples: []Sample{r(5), p(11), p(40)}}},
		{name: "a person resumed it early", o: Observed{
			Samples: []Sample{r(5), p(11), p(40), r(41)},
			Journal: []Record{{At: at(40.5), Kind: RecResume, Task: "a"}},
		}},
		// Seed 7743016425574120: redispatched while paused, the task's next
		// attempt was held at once on its account's pause, with a new start.
		{name: "a person redispatched it while it was paused", o: Observed{
			Samples: []Sample{r(5), p(11), p(40), sample(41, nil, paused("a", 1, planA1,
				Pause{Reason: PauseUsageLimit, Since: at(40.8), Until: at(71), ResetAt: at(70), Count: 2}))},
			Journal: []Record{{At: at(40.5), Kind: RecRedispatch, Task: "a"}},
		}},
		{name: "a person resumed its account early", o: Observed{
			Samples: []Sample{p(11), p(40), r(41)},
			Journal: []Record{
				{At: at(1), Kind: RecTaskStart, Task: "a", Details: map[string]string{"account": "acct-1"}},
				{At: at(40.5), Kind: RecResume, Details: map[string]string{"account": "acct-1"}},
			},
		}},
		{name: "a person resumed another account", o: Observed{
			Samples: []Sample{p(11), p(40), r(41)},
			Journal: []Record{
				{At: at(1), Kind: RecTaskStart, Task: "a", Details: map[string]string{"account": "acct-1"}},
				{At: at(40.5), Kind: RecResume, Details: map[string]string{"account": "acct-2"}},
			},
		}, want: []want{{InvUsageLimitPauseUntilReset, "a", []string{"no person resumed it"}}}},
		{name: "aborted while paused", o: Observed{Samples: []Sample{p(11), sample(20, nil, closed("a", 1, planA1))}}},
		{
			// Cancelled on the board while paused: the sample after the
			// pause caught the task ending, not running again.
			name: "ending after an abort while paused",
			o:    Observed{Samples: []Sample{p(11), sample(20, nil, TaskSample{Task: "a", Open: true, Stage: "finish", Attempt: 1, PlanName: planA1})}},
		},
		{name: "redispatched while paused", o: Observed{Samples: []Sample{p(11), sample(20, nil, running("a", 2, planA2, "implement"))}}},
		{name: "no reset was read", o: Observed{Samples: []Sample{
			sample(11, nil, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(10), Until: at(40)})), r(41),
		}}},
		{name: "resumed before the reset, nobody asked", o: Observed{
			Samples: []Sample{r(5), p(11), p(30), r(31)},
			Journal: []Record{{At: at(20), Kind: RecResume, Task: "b"}},
		}, want: []want{{InvUsageLimitPauseUntilReset, "a", []string{
			"usage_limit pause since 14:00:10.000", "reset 14:01:10.000", "over by 14:00:31.000", "39s before its reset", "attempt 1", "running at attempt 1"}}}},
		{name: "paused again before the reset", o: Observed{Samples: []Sample{
			p(11), p(30),
			sample(35, nil, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(33), Until: at(71), ResetAt: at(70), Count: 2})),
		}}, want: []want{{InvUsageLimitPauseUntilReset, "a", []string{"over by 14:00:33.000"}}}},
		{name: "scheduled to resume before the reset", o: Observed{Samples: []Sample{
			sample(11, nil, paused("a", 1, planA1, Pause{Reason: PauseUsageLimit, Since: at(10), Until: at(40), ResetAt: at(70)})),
		}}, want: []want{{InvUsageLimitPauseUntilReset, "a", []string{"scheduled to resume at 14:00:40.000", "30s before its reset"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckUsageLimitPauses(&tc.o, Config{}), tc.want...) })
	}
}

func TestCheckBudgetPauses(t *testing.T) {
	bud := Pause{Reason: PauseBudget, Since: at(10), Count: 1, Budget: "Budget exceeded ($0.62 spent of $0.50)"}
	p := func(s float64) Sample { return sample(s, nil, paused("a", 1, planA1, bud)) }
	r := func(s float64) Sample { return sample(s, nil, running("a", 1, planA1, "test")) }
	cases := []struct {
		name string
		o    Observed
		want []want
	}{
		{name: "raised", o: Observed{
			Samples: []Sample{r(5), p(11), p(30), r(31)},
			Journal: []Record{{At: at(30.5), Kind: RecBudgetRaise, Task: "a", Details: map[string]string{"limitUsd": "5"}}},
		}},
		{name: "resumed by a person", o: Observed{
			Samples: []Sample{p(11), r(31)},
			Journal: []Record{{At: at(20), Kind: RecResume, Task: "a"}},
		}},
		{name: "still paused at the end", o: Observed{Samples: []Sample{p(11), p(500)}}},
		{name: "aborted while paused", o: Observed{Samples: []Sample{p(11), sample(20, nil, closed("a", 1, planA1))}}},
		{
			// An account's pause notice reached a task paused for its
			// budget and replaced its pause with a timed one.
			name: "an account's notice turns it into a usage-limit pause",
			o: Observed{
				Samples: []Sample{p(11), p(20), sample(21, nil, paused("a", 1, planA1,
					Pause{Reason: PauseUsageLimit, Since: at(20.5), Until: at(80), ResetAt: at(79), Account: "acct-1", By: "b"}))},
				Journal: []Record{{At: at(15), Kind: RecBudgetRaise, Task: "b"}},
			},
			want: []want{{InvBudgetPauseUntilRaised, "a", []string{
				"budget pause since 14:00:10.000", "Budget exceeded ($0.62 spent of $0.50)", "over by 14:00:20.500",
				"no budget raised", "paused (usage_limit)", "account acct-1"}}},
		},
		{name: "an account's resume notice ends it", o: Observed{
			Samples: []Sample{p(11), p(20), r(22)},
			Journal: []Record{
				{At: at(1), Kind: RecTaskStart, Task: "a", Details: map[string]string{"account": "acct-1"}},
				{At: at(21), Kind: RecResume, Details: map[string]string{"account": "acct-1"}},
			},
		}, want: []want{{InvBudgetPauseUntilRaised, "a", []string{"over by 14:00:22.000", "running at attempt 1"}}}},
		{name: "the budget pause gets an end of its own", o: Observed{Samples: []Sample{
			p(11), sample(12, nil, paused("a", 1, planA1, Pause{Reason: PauseBudget, Since: at(10), Until: at(70)})),
		}}, want: []want{{InvBudgetPauseUntilRaised, "a", []string{"became a timed pause", "14:01:10.000"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expect(t, CheckBudgetPauses(&tc.o, Config{}), tc.want...) })
	}
}
