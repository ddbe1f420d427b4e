package main

import "karvi-edda-temporal/api/task"

// scaledTuning is a task's tuning at the soak's time scale: the one
// setting every period the workflow waits on follows (the pause margin,
// the host grace, how often a waiting attempt asks its pool, ...).
func scaledTuning(scale float64) *taskapi.Tuning {
	return &taskapi.Tuning{TimeScale: scale}
}
