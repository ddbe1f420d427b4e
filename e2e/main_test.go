//go:build realserver

package e2e

import (
	"testing"

	"karvi-edda-temporal/testkit/testrig"
)

// Every test shares one dev server; each has its own task queue, work root
// and worker (testrig.New), so tests do not see each other's tasks.
func TestMain(m *testing.M) { testrig.Main(m, "e2e") }
