package temporalconn

import (
	"fmt"
	"io"

	"go.temporal.io/sdk/log"
)

// ErrorLogger is the SDK logger for a command-line tool: the SDK's
// connection chatter stays off the tool's output, its errors go to w.
func ErrorLogger(w io.Writer) log.Logger { return errorLogger{w} }

type errorLogger struct{ w io.Writer }

func (errorLogger) Debug(string, ...any) {}
func (errorLogger) Info(string, ...any)  {}
func (errorLogger) Warn(string, ...any)  {}
func (l errorLogger) Error(msg string, kv ...any) {
	fmt.Fprintln(l.w, append([]any{"temporal:", msg}, kv...)...)
}
