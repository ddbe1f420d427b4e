package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// The dry run prints exactly the plan BuildPlan makes for the full dispatch
// (the golden reviewed against docs/contract.md §3).
func TestPlanPrintsTheGoldenPlan(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"plan", "../testdata/dispatch/full.json"}, nil, &out)
	require.NoError(t, err)
	want, err := os.ReadFile("../testdata/dispatch/full.plan.yaml")
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}

func TestPlanReadsStdinAndHonoursAttempt(t *testing.T) {
	data, err := os.ReadFile("../testdata/sample/dispatch.json")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-attempt", "2", "-"}, bytes.NewReader(data), &out))
	require.Contains(t, out.String(), "name: karvi-t5-020d01-r2")
	require.Contains(t, out.String(), `REDISPATCH: "1"`)
}

func TestPlanRejectsBadInputNamingTheField(t *testing.T) {
	cases := map[string]string{
		`{"taskId":"../x","message":"m"}`:                  "taskId",
		`{"taskId":"T1","message":""}`:                     "message",
		`{"taskId":"T1","message":"m","timeoutSec":"ten"}`: "timeoutSec",
		`{"taskId":"T1","message":"m","skill":"no-such"}`:  "skill",
		`not json`: "dispatch plan",
		`{"taskId":"T1","message":"m","timeoutSec":-5}`:      "timeoutSec",
		`{"taskId":"T1","message":"m","artifacts":[{}]}`:     "artifacts",
		`{"taskId":"T1","message":"m","mode":"sideways"}`:    "mode",
		`{"taskId":"T1","message":"m","requiredSkills":[1]}`: "requiredSkills",
	}
	for in, field := range cases {
		var out bytes.Buffer
		err := run(context.Background(), []string{"plan", "-"}, strings.NewReader(in), &out)
		require.Error(t, err, in)
		require.Contains(t, err.Error(), field, in)
		require.Empty(t, out.String(), "nothing printed for %s", in)
	}
}

func TestUsageErrors(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), nil, nil, &out))
	require.Contains(t, out.String(), "starter plan")
	err := run(context.Background(), []string{"frobnicate", "x"}, nil, &out)
	require.Error(t, err)
	require.Contains(t, err.Error(), `unknown command "frobnicate"`)
	err = run(context.Background(), []string{"status"}, nil, &out)
	require.ErrorContains(t, err, "exactly one argument")
}

func TestRootCauseIsTheInnermostApplicationError(t *testing.T) {
	inner := temporal.NewNonRetryableApplicationError(`dispatch plan: skill: no plan template named "x"`, "InvalidDispatch", nil)
	wrapped := fmt.Errorf("workflow execution error: %w", fmt.Errorf("activity error (type: PreparePlan): %w", inner))
	require.Equal(t, `dispatch plan: skill: no plan template named "x"`, rootCause(wrapped))
	require.Equal(t, "plain", rootCause(errors.New("plain")))
}
