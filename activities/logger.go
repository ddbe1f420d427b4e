package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
)

// Logger is the activity's logger, or a silent one outside an activity
// (a test calling a method directly).
func Logger(ctx context.Context) interface{ Warn(string, ...any) } {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return nopLogger{}
}

type nopLogger struct{}

func (nopLogger) Warn(string, ...any) {}
