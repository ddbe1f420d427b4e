package observe

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/soak"
)

// A notification sent again after its worker died, before its workflow
// task was recorded, carries the same id with a later time and another
// host: the same event. Another reason under the same id is another event.
func TestANotificationSentAgainByAnotherHostIsTheSameEvent(t *testing.T) {
	at := time.Date(2026, 12, 2, 2, 15, 23, 0, time.UTC)
	first := `{"id":"karvi-task-S001-f4f3bf06-paused-1","version":1,"kind":"paused","time":"2026-12-02T02:15:23.124Z","task_id":"S001","host":"h1","reason":"usage limit in phase implement","reset_at":"2026-12-02T02:15:25Z","details":{"phase":"implement","until":"2026-12-02T02:15:26Z"}}`
	again := `{"id":"karvi-task-S001-f4f3bf06-paused-1","version":1,"kind":"paused","time":"2026-12-02T02:15:33.144Z","task_id":"S001","host":"h2","reason":"usage limit in phase implement","reset_at":"2026-12-02T02:15:25Z","details":{"phase":"implement","until":"2026-12-02T02:15:33Z"}}`
	other := `{"id":"karvi-task-S001-f4f3bf06-paused-1","version":1,"kind":"paused","time":"2026-12-02T02:15:43.144Z","task_id":"S001","host":"h2","reason":"usage limit in phase docs","reset_at":"2026-12-02T02:16:25Z"}`
	read := func(bodies ...string) []soak.Webhook {
		path := filepath.Join(t.TempDir(), "webhooks.jsonl")
		var data []byte
		for i, b := range bodies {
			l, err := WebhookLine(at.Add(time.Duration(i)*10*time.Second), "karvi-task-S001-f4f3bf06-paused-1", []byte(b))
			require.NoError(t, err)
			data = append(append(data, l...), '\n')
		}
		require.NoError(t, os.WriteFile(path, data, 0o644))
		ws, err := ReadWebhooks(path)
		require.NoError(t, err)
		return ws
	}
	require.Empty(t, soak.CheckWebhookIDsUnique(&soak.Observed{Webhooks: read(first, again)}, soak.Config{}))
	vs := soak.CheckWebhookIDsUnique(&soak.Observed{Webhooks: read(first, again, other)}, soak.Config{})
	require.Len(t, vs, 1)
	require.Contains(t, vs[0].Evidence, "names 2 different events")
}
