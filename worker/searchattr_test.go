package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
)

// fakeOperator is the operator API with only the two calls the worker makes.
type fakeOperator struct {
	operatorservice.OperatorServiceClient
	have   map[string]enumspb.IndexedValueType
	addErr error
	added  map[string]enumspb.IndexedValueType
}

func (f *fakeOperator) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: f.have}, nil
}

func (f *fakeOperator) AddSearchAttributes(_ context.Context, req *operatorservice.AddSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.AddSearchAttributesResponse, error) {
	f.added = req.GetSearchAttributes()
	if f.addErr != nil {
		return nil, f.addErr
	}
	return &operatorservice.AddSearchAttributesResponse{}, nil
}

func TestSearchAttributesAddedOnlyWhenMissing(t *testing.T) {
	kw := enumspb.INDEXED_VALUE_TYPE_KEYWORD
	all := map[string]enumspb.IndexedValueType{"KarviTaskId": kw, "EddaPlanName": kw, "EddaCurrentPhase": kw, "KarviTaskStatus": kw}

	op := &fakeOperator{have: all}
	require.NoError(t, ensureSearchAttributes(context.Background(), op, "ns"))
	require.Nil(t, op.added, "nothing added when all are there")

	op = &fakeOperator{have: map[string]enumspb.IndexedValueType{"KarviTaskId": kw, "EddaPlanName": kw}}
	require.NoError(t, ensureSearchAttributes(context.Background(), op, "ns"))
	require.Equal(t, map[string]enumspb.IndexedValueType{"EddaCurrentPhase": kw, "KarviTaskStatus": kw}, op.added)

	// Added concurrently by another worker: fine.
	op = &fakeOperator{addErr: serviceerror.NewAlreadyExists("exists")}
	require.NoError(t, ensureSearchAttributes(context.Background(), op, "ns"))
}

// Without the right to add them (a Temporal Cloud API key without the
// namespace admin role, an authorizer), the worker stops and says the
// exact command an operator runs, for the missing attributes only.
func TestSearchAttributesRefusedNamesTheCommand(t *testing.T) {
	kw := enumspb.INDEXED_VALUE_TYPE_KEYWORD
	op := &fakeOperator{have: map[string]enumspb.IndexedValueType{"KarviTaskId": kw},
		addErr: serviceerror.NewPermissionDenied("Request unauthorized.", "")}
	err := ensureSearchAttributes(context.Background(), op, "prod.a1b2c")
	require.Error(t, err)
	require.Contains(t, err.Error(), "Request unauthorized.")
	require.Contains(t, err.Error(), "temporal operator search-attribute create --namespace prod.a1b2c "+
		"--name EddaCurrentPhase --type Keyword --name EddaPlanName --type Keyword --name KarviTaskStatus --type Keyword")
	require.NotContains(t, err.Error(), "--name KarviTaskId", "only the missing ones")
	require.Contains(t, err.Error(), "-register-search-attributes=false")
}
