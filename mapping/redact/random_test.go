package redact

import (
	"math/rand/v2"
	"testing"
)

// TestLooksRandomRates pins the statistical rule's quality: random strings
// in the usual secret alphabets are caught, long identifiers are not.
func TestLooksRandomRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the rates are reproducible
	alphabets := map[string]string{
		"base64":    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		"base64url": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
		"base62":    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
		"base36":    "abcdefghijklmnopqrstuvwxyz0123456789",
	}
	const trials = 5000
	for name, alpha := range alphabets {
		for _, n := range []int{40, 64} {
			missed := 0
			b := make([]byte, n)
			for range trials {
				for i := range b {
					b[i] = alpha[rng.IntN(len(alpha))]
				}
				if !looksRandom(string(b)) {
					missed++
				}
			}
			// Measured: under 0.5% at 40, under 0.1% at 64.
			limit := trials / 100
			if n >= 64 {
				limit = trials / 400
			}
			if missed > limit {
				t.Errorf("%s, %d chars: missed %d of %d", name, n, missed, trials)
			}
		}
	}
	identifiers := []string{
		"src/components/authentication/middleware/index",
		"implement-user-authentication-with-oauth-providers",
		"TestBriefReducerHandlesPhaseFailedWithRetry2",
		"karvi-edda-temporal/internal/proc/process_group_linux_test",
		"BenchmarkStringTypicalEventLineWithNoSecrets",
		"ERR_CONNECTION_REFUSED_WHILE_CONTACTING_UPSTREAM_SERVER",
		"run-20260217-2227-coder-auth-task-42-attempt-3",
		"550e8400-e29b-41d4-a716-446655440000/550e8400-e29b-41d4-a716-446655440000",
		"crates/edda-conductor/src/runner/phase_executor_v2_test",
		"Test_Parse_DispatchPlan_With_Unknown_Fields_And_Artifacts_2",
		"K8sClusterAutoscalerV2Beta1HorizontalPodAutoscalerSpec",
		"run-20260217-2227/phase-3/attempt-2/stdout/2026-02-17",
		"usr/lib/x86_64-linux-gnu/libstdc/x86_64-pc-linux-gnu/13",
		"TestHTTPHandlerJSONRoundTripWithOAuth2AndJWTs",
		"--------------------------------------------------",
	}
	for _, s := range identifiers {
		if looksRandom(s) {
			t.Errorf("identifier taken for a secret: %s", s)
		}
		if got := String("see " + s + " here"); got != "see "+s+" here" {
			t.Errorf("String masked an identifier: %q", got)
		}
	}
}
