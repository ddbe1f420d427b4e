package accountapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/timescale"
)

// Joins arriving together share one read of their account's pause, and
// the joins of the next moment take it too; a failed read is not kept,
// and another account is read on its own.
func TestJoinsShareAFreshReadOfThePause(t *testing.T) {
	var p pauseReads
	var reads atomic.Int32
	release := make(chan struct{})
	until := time.Now().Add(-time.Minute) // a pause that is over
	do := func(context.Context) (View, bool, error) {
		reads.Add(1)
		<-release
		return View{Account: "a", PausedUntil: until}, true, nil
	}
	var wg sync.WaitGroup
	got := make([]View, 50)
	for i := range got {
		wg.Go(func() {
			v, inMemo, err := p.read(context.Background(), "a", do)
			assert.NoError(t, err)
			assert.True(t, inMemo)
			got[i] = v
		})
	}
	// However far each join got before the read returns (waiting for it,
	// or not yet asking), all of them take its answer.
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, reads.Load(), "50 joins at once read the account once")
	for _, v := range got {
		require.True(t, v.PausedUntil.Equal(until))
	}
	_, _, err := p.read(context.Background(), "a", do)
	require.NoError(t, err)
	require.EqualValues(t, 1, reads.Load(), "a join right after takes the fresh read")

	_, _, err = p.read(context.Background(), "b", do)
	require.NoError(t, err)
	require.EqualValues(t, 2, reads.Load(), "another account is read on its own")

	boom := errors.New("deadline")
	_, _, err = p.read(context.Background(), "c", func(context.Context) (View, bool, error) {
		return View{}, false, boom
	})
	require.ErrorIs(t, err, boom)
	_, _, err = p.read(context.Background(), "c", do)
	require.NoError(t, err, "a failed read is not kept")
	require.EqualValues(t, 3, reads.Load())
}

// A read older than pauseFresh is not taken: a pause that began since is
// seen by the next join.
func TestAStaleReadOfThePauseIsReadAgain(t *testing.T) {
	var p pauseReads
	n := 0
	do := func(context.Context) (View, bool, error) {
		n++
		return View{Account: "a"}, true, nil
	}
	_, _, err := p.read(context.Background(), "a", do)
	require.NoError(t, err)
	p.accounts["a"].at = time.Now().Add(-pauseFresh)
	_, _, err = p.read(context.Background(), "a", do)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// A join whose own deadline passes while it waits for another's read
// gives up with its deadline.
func TestAJoinWaitingForAReadKeepsItsDeadline(t *testing.T) {
	var p pauseReads
	release := make(chan struct{})
	defer close(release)
	go func() {
		_, _, _ = p.read(context.Background(), "a", func(context.Context) (View, bool, error) {
			<-release
			return View{}, true, nil
		})
	}()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.accounts["a"] != nil && p.accounts["a"].done != nil
	}, time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _, err := p.read(ctx, "a", func(context.Context) (View, bool, error) {
		t.Error("read while another read is under way")
		return View{}, false, nil
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// A read that finds the account paused is not shared: a resume right after
// it would reach no join that took it, and its task would wait out the
// pause. Each join then reads for itself.
func TestAReadThatFindsAPauseIsNotShared(t *testing.T) {
	var p pauseReads
	n := 0
	paused := true
	do := func(context.Context) (View, bool, error) {
		n++
		if paused {
			return View{Account: "a", PausedUntil: time.Now().Add(time.Hour)}, true, nil
		}
		return View{Account: "a"}, true, nil
	}
	v, _, err := p.read(context.Background(), "a", do)
	require.NoError(t, err)
	require.True(t, v.PausedUntil.After(time.Now()))
	paused = false // the account resumed
	v, _, err = p.read(context.Background(), "a", do)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the paused answer was taken again")
	require.True(t, v.PausedUntil.IsZero(), "the join saw the old pause")
	_, _, err = p.read(context.Background(), "a", do)
	require.NoError(t, err)
	require.Equal(t, 2, n, "an answer without a pause is shared")
}

// At the worker's time scale a read is shared for pauseFresh scaled: a
// read older than that is read again.
func TestASharedReadIsFreshForTheScaledPeriod(t *testing.T) {
	var p pauseReads
	n := 0
	do := func(context.Context) (View, bool, error) {
		n++
		return View{Account: "a"}, true, nil
	}
	fresh := timescale.Scale(4).Of(pauseFresh)
	_, _, err := p.readFresh(context.Background(), "a", fresh, do)
	require.NoError(t, err)
	p.accounts["a"].at = time.Now().Add(-fresh)
	_, _, err = p.readFresh(context.Background(), "a", fresh, do)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a read as old as the scaled period is read again")
	_, _, err = p.readFresh(context.Background(), "a", time.Hour, do)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a fresh read is shared")
}
