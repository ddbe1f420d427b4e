package main

import (
	"time"

	"karvi-edda-temporal/workflows/taskflow/taskapi"
)

// timeScaleEnv is the environment variable every process of the runtime
// reads its time scale from.
const timeScaleEnv = "KARVI_EDDA_TIME_SCALE"

// scaledTuning is a task's tuning at the soak's time scale: each period
// the workflow waits on, divided by the scale.
func scaledTuning(scale float64) *taskapi.Tuning {
	of := func(d time.Duration) time.Duration { return max(time.Duration(float64(d)/scale), time.Millisecond) }
	return &taskapi.Tuning{
		PauseMargin:  of(time.Minute),
		PauseWait:    of(30 * time.Minute),
		HostGrace:    of(5 * time.Minute),
		SlotAskEvery: of(5 * time.Minute),
		TailWait:     of(10 * time.Minute),
	}
}
