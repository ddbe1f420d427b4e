package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// `starter account` with no -account shows the default account of the
// task queue, the one the workers of that queue give tasks that name none.
func TestAccountDefaultsToTheQueues(t *testing.T) {
	require.Equal(t, "default.karvi-edda", accountOrDefault("", "karvi-edda"))
	require.Equal(t, "team", accountOrDefault("team", "karvi-edda"))
}
