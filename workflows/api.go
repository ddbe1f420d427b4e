package workflows

import "karvi-edda-temporal/workflows/taskapi"

// The task workflow's public API lives in taskapi, so that clients do not
// link the worker's activity types; these aliases keep the names the
// workflow code and the tests use.

const (
	TaskWorkflowName = taskapi.TaskWorkflowName
	DefaultTaskQueue = taskapi.DefaultTaskQueue
	SignalAbort      = taskapi.SignalAbort
	SignalRedispatch = taskapi.SignalRedispatch
	SignalNote       = taskapi.SignalNote
	SignalResume     = taskapi.SignalResume
	SignalBudget     = taskapi.SignalBudget
	QueryBrief       = taskapi.QueryBrief
	QueryStatus      = taskapi.QueryStatus
	QueryCost        = taskapi.QueryCost
	QueryJob         = taskapi.QueryJob

	StagePrepare = taskapi.StagePrepare
	StageStart   = taskapi.StageStart
	StageRunning = taskapi.StageRunning
	StageFinish  = taskapi.StageFinish
	StageDone    = taskapi.StageDone
	StagePaused  = taskapi.StagePaused

	EndedCompleted    = taskapi.EndedCompleted
	EndedBlocked      = taskapi.EndedBlocked
	EndedAborted      = taskapi.EndedAborted
	EndedRedispatched = taskapi.EndedRedispatched
	EndedHostLost     = taskapi.EndedHostLost
)

type (
	TaskInput        = taskapi.TaskInput
	Tuning           = taskapi.Tuning
	AbortSignal      = taskapi.AbortSignal
	RedispatchSignal = taskapi.RedispatchSignal
	NoteSignal       = taskapi.NoteSignal
	ResumeSignal     = taskapi.ResumeSignal
	Stage            = taskapi.Stage
	AttemptSummary   = taskapi.AttemptSummary
	Status           = taskapi.Status
	Result           = taskapi.Result
	SlotRequest      = taskapi.SlotRequest
	SlotStatus       = taskapi.SlotStatus
)

var (
	WorkflowID           = taskapi.WorkflowID
	SearchTaskID         = taskapi.SearchTaskID
	SearchPlanName       = taskapi.SearchPlanName
	SearchCurrentPhase   = taskapi.SearchCurrentPhase
	SearchTaskStatus     = taskapi.SearchTaskStatus
	SearchAttributeNames = taskapi.SearchAttributeNames
	StartSummary         = taskapi.StartSummary
)
