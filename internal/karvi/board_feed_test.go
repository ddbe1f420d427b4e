package karvi_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/testkit/karvifake"
)

// The feed sends connected, then the whole board after a write; the
// board read answers the same document with its _version.
func TestFollowEventsAndGetBoard(t *testing.T) {
	k, c := setup(t, karvifake.Options{Token: "tok-1"}, karvifake.Task{ID: "T1", Status: "dispatched"})
	raw, err := c.GetBoard(context.Background())
	require.NoError(t, err)
	var b struct {
		Version  int `json:"_version"`
		TaskPlan struct {
			Tasks []map[string]any `json:"tasks"`
		} `json:"taskPlan"`
	}
	require.NoError(t, json.Unmarshal(raw, &b))
	require.Equal(t, k.Version(), b.Version)
	require.Len(t, b.TaskPlan.Tasks, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	stop := errors.New("seen enough")
	err = c.FollowEvents(ctx, func(ev karvi.FeedEvent) error {
		names = append(names, ev.Name)
		if ev.Name == "connected" {
			require.NoError(t, k.SetStatus("T1", "cancelled", "no longer needed"))
			return nil
		}
		require.NoError(t, json.Unmarshal(ev.Data, &b))
		require.Equal(t, "cancelled", b.TaskPlan.Tasks[0]["status"])
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []string{"connected", "board"}, names)
}

// A wrong token is refused as unauthorized, not retried as transient.
func TestFollowEventsUnauthorized(t *testing.T) {
	k, _ := setup(t, karvifake.Options{Token: "tok-1"})
	c, err := karvi.New(k.URL(), "wrong")
	require.NoError(t, err)
	err = c.FollowEvents(context.Background(), func(karvi.FeedEvent) error { return nil })
	require.True(t, karvi.IsUnauthorized(err), "%v", err)
}
