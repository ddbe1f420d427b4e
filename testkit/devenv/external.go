package devenv

import (
	"context"
	"errors"
	"fmt"
	"karvi-edda-temporal/api/task"
	"os"
	"os/exec"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	// ExternalAddressEnv names a running Temporal server (host:port) that
	// the suites use instead of starting their shared dev server, e.g. the
	// PostgreSQL-backed one of `make cluster`.
	ExternalAddressEnv = "KARVI_TEST_TEMPORAL_ADDRESS"
	// ExternalRestartEnv is a shell command that kills that server and
	// starts it again on the same address and database (Server.Restart);
	// `make cluster-test` sets it to `scripts/cluster.sh restart-server`.
	ExternalRestartEnv = "KARVI_TEST_TEMPORAL_RESTART"
	// DefaultNamespace is the namespace of a dev server's workflows.
	DefaultNamespace = "default"
)

// ExternalAddress is the external server the suites were pointed at, if any.
func ExternalAddress() (string, bool) {
	addr := strings.TrimSpace(os.Getenv(ExternalAddressEnv))
	return addr, addr != ""
}

// ExternalServer uses the Temporal server at addr: it registers a namespace
// of its own there (namespace, with a day's retention), so that one run's
// workflows never meet another's, adds the workflow's search attributes to
// it, and waits until the server accepts both. Stop leaves the server
// running; Restart runs ExternalRestartEnv's command.
func ExternalServer(ctx context.Context, addr, namespace string) (*Server, error) {
	s := &Server{Addr: addr, Namespace: namespace, external: true, restart: os.Getenv(ExternalRestartEnv)}
	cl, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: quiet{}})
	if err != nil {
		return nil, fmt.Errorf("dial the Temporal server %s (%s): %w", addr, ExternalAddressEnv, err)
	}
	defer cl.Close()
	_, err = cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		Description: "karvi-edda-temporal test namespace"})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("register namespace %s on %s: %w", namespace, addr, err)
	}
	// A new namespace reaches the frontend's and history's caches on
	// their next refresh (a few seconds): until then it is "not found".
	if err := poll(ctx, "namespace "+namespace+" served", func(ctx context.Context) error {
		_, err := cl.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace})
		return err
	}); err != nil {
		return nil, err
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range taskapi.SearchAttributeNames() {
		missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	_, err = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing})
	var saExists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &saExists) {
		return nil, fmt.Errorf("add search attributes to namespace %s: %w", namespace, err)
	}
	if err := poll(ctx, "search attributes of "+namespace, func(ctx context.Context) error {
		have, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err != nil {
			return err
		}
		for name := range missing {
			if _, ok := have.GetCustomAttributes()[name]; !ok {
				return fmt.Errorf("%s not listed yet", name)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// The listing reads the database; history's cache of the namespace
	// catches up on its next refresh (2 s by default).
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(3 * time.Second):
	}
	return s, nil
}

// poll calls f every 250 ms until it succeeds or ctx ends.
func poll(ctx context.Context, what string, f func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *Server) restartExternal(ctx context.Context) error {
	if s.restart == "" {
		return fmt.Errorf("restart the Temporal server at %s: %s is not set (`make cluster-test` sets it)", s.Addr, ExternalRestartEnv)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", s.restart)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("restart the Temporal server (%s): %w\n%s", s.restart, err, out)
	}
	// The command returns once the frontend serves; a client call proves
	// the namespace is back too.
	cl, err := s.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	return poll(ctx, "the restarted server", func(ctx context.Context) error {
		_, err := cl.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: s.Namespace})
		return err
	})
}
