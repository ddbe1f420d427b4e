// Package jaeger runs a Jaeger (bin/jaeger, built from tools/jaeger) with
// its in-memory store on 127.0.0.1 free ports for a test, and reads traces
// back through its HTTP query API, as a person's tools would.
package jaeger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"karvi-edda-temporal/testkit/devenv"
)

// Jaeger is a running Jaeger process.
type Jaeger struct {
	// QueryURL serves the UI and /api; OTLPHTTP and OTLPGRPC receive
	// spans (host:port).
	QueryURL           string
	OTLPHTTP, OTLPGRPC string
	cmd                *exec.Cmd
	done               chan error
}

// Start runs bin/jaeger (KARVI_EDDA_BIN/jaeger) with tools/jaeger/config.yaml
// and waits until its query API answers. Its output goes to logPath.
func Start(ctx context.Context, logPath string) (*Jaeger, error) {
	bin, err := devenv.Binary("jaeger")
	if err != nil {
		return nil, fmt.Errorf("%w (make jaeger builds it)", err)
	}
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	j := &Jaeger{QueryURL: "http://" + addr(ports[0]), OTLPHTTP: addr(ports[2]), OTLPGRPC: addr(ports[3]),
		done: make(chan error, 1)}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	j.cmd = exec.Command(bin, "--config", filepath.Join(root, "tools", "jaeger", "config.yaml"))
	j.cmd.Env = append(os.Environ(),
		"JAEGER_QUERY_HTTP="+addr(ports[0]), "JAEGER_QUERY_GRPC="+addr(ports[1]),
		"JAEGER_OTLP_HTTP="+j.OTLPHTTP, "JAEGER_OTLP_GRPC="+j.OTLPGRPC)
	j.cmd.Stdout, j.cmd.Stderr = logf, logf
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jaeger: %w", err)
	}
	go func() { j.done <- j.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := j.ready(ctx); err == nil {
			return j, nil
		} else if time.Now().After(deadline) {
			j.Stop()
			return nil, fmt.Errorf("jaeger did not answer at %s within 60 s (log %s): %w", j.QueryURL, logPath, err)
		}
		select {
		case err := <-j.done:
			return nil, fmt.Errorf("jaeger exited (%v); see %s", err, logPath)
		case <-ctx.Done():
			j.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (j *Jaeger) ready(ctx context.Context) error {
	var v struct{}
	return j.get(ctx, "/api/services", &v)
}

// PID is the Jaeger process's id.
func (j *Jaeger) PID() int { return j.cmd.Process.Pid }

// Stop ends the process it started, by its pid: TERM, then KILL.
func (j *Jaeger) Stop() {
	if j == nil || j.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(j.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(j.cmd.Process.Pid, syscall.SIGKILL)
		<-j.done
	}
}

// Env is the OpenTelemetry environment that points a process at this
// Jaeger by OTLP over HTTP, under service.
func (j *Jaeger) Env(service string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + j.OTLPHTTP, "OTEL_SERVICE_NAME=" + service}
}

// Trace is a trace as Jaeger's HTTP API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is a span of a Trace.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"` // µs
	Duration      int64       `json:"duration"`  // µs
	Tags          []KeyValue  `json:"tags"`
	Logs          []Log       `json:"logs"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
}

// Reference is a span's parent (CHILD_OF) or link.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Log is a span event.
type Log struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []KeyValue `json:"fields"`
}

// Process is the resource of a trace's spans.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Parent is the span's CHILD_OF parent id, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag key, nil when it has none.
func (s Span) Tag(key string) any {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// Traces are the traces of service (/api/traces?service=...).
func (j *Jaeger) Traces(ctx context.Context, service string) ([]Trace, error) {
	var out struct {
		Data []Trace `json:"data"`
	}
	q := url.Values{"service": {service}, "limit": {"100"}, "lookback": {"2h"}}
	if err := j.get(ctx, "/api/traces?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Trace is one trace by its id (32 hex digits); nil when Jaeger has none.
func (j *Jaeger) Trace(ctx context.Context, id string) (*Trace, error) {
	var out struct {
		Data []Trace `json:"data"`
	}
	err := j.get(ctx, "/api/traces/"+id, &out)
	var nf notFound
	if errors.As(err, &nf) || (err == nil && len(out.Data) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &out.Data[0], nil
}

type notFound struct{ path string }

func (n notFound) Error() string { return n.path + ": not found" }

func (j *Jaeger) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return notFound{path}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
