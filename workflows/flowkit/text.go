package flowkit

import (
	"strings"
	"time"
)

// Clock is a time as summaries and details show it: UTC, to the second.
func Clock(t time.Time) string { return t.UTC().Format("15:04:05") }

// FirstNonBlank is the first of s that is not blank, or "".
func FirstNonBlank(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
