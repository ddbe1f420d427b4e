package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/slots"
)

func TestSlotsCommandLines(t *testing.T) {
	inv, err := parseArgs([]string{"slots"})
	require.NoError(t, err)
	require.Equal(t, "slots", inv.cmd.name)
	require.Empty(t, inv.opts.(*slotsOpts).pool, "no -pool: every pool")
	require.NoError(t, checkFlags(inv))
	inv, err = parseArgs([]string{"slots", "-pool", "bad pool"})
	require.NoError(t, err)
	require.ErrorContains(t, checkFlags(inv), "-pool: pool name")

	inv, err = parseArgs([]string{"slots", "set", "-pool", "gpu", "-max-concurrent", "4", "-max-total", "0", "-check-every", "5s"})
	require.NoError(t, err)
	require.Equal(t, "slots set", inv.cmd.name)
	require.NoError(t, checkFlags(inv))
	total := 0
	require.Equal(t, slotapi.SetRequest{MaxConcurrent: 4, MaxTotal: &total, CheckEvery: 5 * time.Second}, setRequest(*inv.opts.(*slotsSetOpts)))

	inv, err = parseArgs([]string{"slots", "set", "-max-concurrent", "2"})
	require.NoError(t, err)
	require.Nil(t, setRequest(*inv.opts.(*slotsSetOpts)).MaxTotal, "max_total kept unless given")

	inv, err = parseArgs([]string{"start", "-pool", "agents", "-slot-timeout", "10m", "d.json"})
	require.NoError(t, err)
	require.NoError(t, checkFlags(inv))
	require.Equal(t, &taskapi.SlotRequest{Pool: "agents", Timeout: 10 * time.Minute}, slotRequest(inv.opts.(*startOpts).taskPoolOpts))
	inv, err = parseArgs([]string{"start", "d.json"})
	require.NoError(t, err)
	require.Nil(t, slotRequest(inv.opts.(*startOpts).taskPoolOpts), "a task without -pool starts at once")

	inv, err = parseArgs([]string{"run", "start", "-pool", "agents", "run.json"})
	require.NoError(t, err)
	require.Equal(t, "agents", inv.opts.(*runStartOpts).pool)
}

func TestSlotsCommandLineMistakes(t *testing.T) {
	cases := map[string][]string{
		`slots takes no argument; got ["agents"]`:           {"slots", "agents"},
		"-max-concurrent is required":                       {"slots", "set"},
		"max_concurrent 20000 must be between 1 and 10000":  {"slots", "set", "-max-concurrent", "20000"},
		"max_total -1 must be between 0 (no limit) and":     {"slots", "set", "-max-concurrent", "2", "-max-total", "-1"},
		"check every 1ms must be between 1s and 1h0m0s":     {"slots", "set", "-max-concurrent", "2", "-check-every", "1ms"},
		`-pool: pool name "a b" must be`:                    {"slots", "-pool", "a b"},
		"-slot-timeout needs -pool":                         {"start", "-slot-timeout", "1m", "d.json"},
		"-slot-timeout -1m0s must not be negative":          {"start", "-pool", "agents", "-slot-timeout", "-1m", "d.json"},
		`invalid value "x" for flag -max-total: not a numb`: {"slots", "set", "-max-concurrent", "2", "-max-total", "x"},
	}
	for want, args := range cases {
		code, stdout, stderr := cliRun(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
		require.Empty(t, stdout)
		require.Contains(t, stderr, want, args)
		require.Contains(t, stderr, "Usage: starter "+args[0], args)
	}
}

func TestPrintSlots(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC)
	v := slotapi.View{
		Pool: "agents", Limits: slots.Limits{MaxConcurrent: 2, MaxTotal: 10}, CheckEvery: 30 * time.Second, UpdatedAt: now,
		Holders: []slotapi.HolderView{
			{Task: "T5", Attempt: 1, Run: "user-profiles", Since: now.Add(-3 * time.Minute)},
			{Task: "T7", Attempt: 2, Since: now.Add(-10 * time.Second)},
		},
		Waiters: []slotapi.WaiterView{
			{Position: 1, Task: "T9", Attempt: 1, Run: "user-profiles", Since: now.Add(-2 * time.Minute),
				Timeout: 10 * time.Minute, Deadline: now.Add(8 * time.Minute)},
			{Position: 2, Task: "T11", Attempt: 1, Since: now.Add(-time.Minute)},
		},
		Stats:   slots.Stats{Granted: 12, Released: 10, Cancelled: 1, Refused: map[slots.Reason]int{slots.ReasonTimeout: 2}},
		Dropped: 1,
	}
	var b bytes.Buffer
	printSlots(&b, v)
	require.Equal(t, `pool agents: max_concurrent 2, max_total 10 per run, holders checked every 30s; 2 held, 2 waiting
granted 12, released 10 (1 taken back from a closed workflow), refused: timeout 2, 1 stopped waiting

HOLDER  ATTEMPT  RUN            SINCE
T5      1        user-profiles  12:07:00 (3m0s)
T7      2        -              12:09:50 (10s)

LINE  TASK  ATTEMPT  RUN            WAITING SINCE    TIMEOUT
1     T9    1        user-profiles  12:08:00 (2m0s)  10m0s (8m0s left)
2     T11   1        -              12:09:00 (1m0s)  none
`, b.String())

	b.Reset()
	printSlots(&b, slotapi.View{Pool: "p", Limits: slots.Limits{MaxConcurrent: 3}, CheckEvery: time.Minute})
	require.Equal(t, `pool p: max_concurrent 3, no max_total, holders checked every 1m0s; 0 held, 0 waiting
granted 0, released 0

no slot held

nobody waiting
`, b.String())
}
