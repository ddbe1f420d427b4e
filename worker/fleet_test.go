package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The sweep runs every minute unless the tests' variable says otherwise;
// a value that is no positive duration stops the worker, naming it.
func TestFencePeriod(t *testing.T) {
	d, err := fencePeriod(getenv(nil), 1)
	require.NoError(t, err)
	require.Equal(t, time.Minute, d)
	d, err = fencePeriod(getenv(map[string]string{fenceEveryEnv: "250ms"}), 60)
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, d)
	for _, bad := range []string{"soon", "0s", "-1s", "5"} {
		_, err := fencePeriod(getenv(map[string]string{fenceEveryEnv: bad}), 1)
		require.ErrorContains(t, err, fenceEveryEnv, bad)
	}
}
