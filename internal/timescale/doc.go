// Package timescale is the one setting every period of the runtime is
// divided by, so that a test or a soak can make a minute last a second
// without touching each period on its own. A deployment that sets nothing
// runs at scale 1: every period is its production default.
//
// The worker reads it from -time-scale (Env), the starter and the karvi
// fake from Env; workflows never read it themselves but get it in their
// inputs (taskapi.Tuning.TimeScale and the like), so their histories stay
// deterministic. docs/timescale.md lists every period it scales.
package timescale
