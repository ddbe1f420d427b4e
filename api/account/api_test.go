package accountapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A worker's default account is one per task queue, always a valid name,
// and two queues never share one.
func TestQueueAccount(t *testing.T) {
	long := strings.Repeat("q", 80)
	for _, tc := range []struct{ queue, want string }{
		{"karvi-edda", "default.karvi-edda"},
		{"team@host/x y", ""},
		{long, ""},
	} {
		got := QueueAccount(tc.queue)
		require.NoError(t, ValidName(got), "%q", tc.queue)
		if tc.want != "" {
			require.Equal(t, tc.want, got)
		}
	}
	require.True(t, strings.HasPrefix(QueueAccount("team@host/x y"), "default.team_host_x_y-"), QueueAccount("team@host/x y"))
	require.NotEqual(t, QueueAccount(long), QueueAccount(long+"2"), "cut names keep apart")
	require.NotEqual(t, QueueAccount("a@b"), QueueAccount("a_b"), "mapped names keep apart")
}
