package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/karvifake"
)

// A rig reuses its fakes and their clients for every run of a scenario, so
// its comparison loops PATCH once per event for several runs' events in
// all: more than karvi's default bucket. Against fakes without a rate limit
// their client must not keep one of its own, or a later run's loops wait on
// what the earlier runs spent (one PATCH every half second once karvi's
// default bucket is spent). Congested is the client's own word that it is
// pacing brief writes to a limit; the loop is stopped as soon as it says
// so, so the test does not wait out the bucket to fail.
func TestComparisonLoopClientKeepsNoLimitTheFakeHasNot(t *testing.T) {
	fake := karvifake.New(karvifake.Options{RateLimit: karvifake.RateLimitOff})
	url, err := fake.Start()
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	require.NoError(t, fake.AddTask(karvifake.Task{ID: "T1", Status: "pending", BriefPath: true, Brief: json.RawMessage(`{}`)}))
	kc, err := fakeClient(url, karvifake.RateLimitOff)
	require.NoError(t, err)

	// Three of karvi's default buckets' worth of events, each a PATCH.
	progress := 3 * karvi.DefaultRateLimit
	var b strings.Builder
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(seq int, rest string) {
		fmt.Fprintf(&b, `{"seq":%d,"ts":%q,%s}`+"\n", seq, ts.Add(time.Duration(seq)*time.Millisecond).Format(time.RFC3339Nano), rest)
	}
	line(0, `"type":"plan_start","plan_name":"p","phase_count":1`)
	line(1, `"type":"phase_start","phase_id":"work","attempt":1`)
	for i := range progress {
		line(2+i, fmt.Sprintf(`"type":"agent_progress","phase_id":"work","n":%d`, i+1))
	}
	line(2+progress, `"type":"phase_passed","phase_id":"work","attempt":1,"duration_ms":300,"cost_usd":0.5`)
	line(3+progress, `"type":"plan_completed","phases_passed":1,"total_cost_usd":0.5`)
	events := 4 + progress
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var heldBackAt atomic.Int64
	heldBackAt.Store(-1)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for ctx.Err() == nil {
			if kc.Congested() {
				heldBackAt.Store(int64(len(fake.Writes("T1"))))
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	st, err := bench.Loop{Mode: bench.Poll, Interval: time.Millisecond, EventsPath: path, TaskID: "T1",
		Summary: mapping.PlanSummary{Name: "karvi-t1", PhaseIDs: []string{"work"}}, Karvi: kc}.Run(ctx)
	cancel()
	<-watching
	require.NoError(t, err)
	require.EqualValues(t, -1, heldBackAt.Load(),
		"the loop's client paces brief writes to a rate limit (congested after %d of them), though the fake has none", heldBackAt.Load())
	require.Equal(t, bench.LoopStats{Events: events, Patches: events}, st)
	require.Len(t, fake.Writes("T1"), events+1, "the skeleton and one PATCH an event")
	require.Zero(t, fake.Stats().Refused)
}
