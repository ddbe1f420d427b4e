package codec

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// recorder sits outside the encryption codec, where the SDK hands payloads
// to the server, and keeps a copy of everything that passes.
type recorder struct {
	mu   sync.Mutex
	seen []*commonpb.Payload
}

func (r *recorder) record(ps []*commonpb.Payload) []*commonpb.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, ps...)
	return ps
}

func (r *recorder) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return r.record(ps), nil
}

func (r *recorder) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return r.record(ps), nil
}

const workflowSecret = "brief for task T5: do-not-leak-0123456789"

func shout(_ context.Context, s string) (string, error) { return s + "!", nil }

func echoWorkflow(ctx workflow.Context, in string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, shout, in).Get(ctx, &out)
	return out, err
}

func TestWorkflowPayloadsAreEncrypted(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	rec := &recorder{}
	// Codecs apply last to first on encode: ours encrypts, then rec sees.
	env.SetDataConverter(converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		rec, NewCodec(mustKeys(t, key(t, "k1")))))
	env.RegisterActivity(shout)
	env.ExecuteWorkflow(echoWorkflow, workflowSecret)

	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	if got != workflowSecret+"!" {
		t.Fatalf("result %q", got)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	// Workflow input, activity input, activity result, workflow result.
	if len(rec.seen) < 4 {
		t.Fatalf("recorded only %d payloads", len(rec.seen))
	}
	for i, p := range rec.seen {
		if enc := string(p.Metadata[converter.MetadataEncoding]); enc != MetadataEncodingEncrypted {
			t.Errorf("payload %d has encoding %q", i, enc)
		}
		if bytes.Contains(p.Data, []byte("do-not-leak")) {
			t.Errorf("payload %d carries plaintext", i)
		}
	}
}
