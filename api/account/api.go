// Package accountapi names what a client, a task workflow and the account
// workflow say to each other about an agent account's usage-limit pause.
// An account is the agent login the conductors of several tasks share: a
// usage limit met by one of them holds for all.
package accountapi

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// Names of the account workflow's interface. They never change.
const (
	WorkflowName = "AccountWorkflow"

	// UpdateJoin takes a JoinRequest: the task becomes a member (it hears
	// of the account's pauses) and learns whether the account is paused.
	// Answers a View.
	UpdateJoin = "join"
	// UpdateLimit takes a LimitRequest: a member met a usage limit; the
	// account is paused until the request's Until, and every other member
	// hears of it. Answers a View.
	UpdateLimit = "limit"
	// UpdateResume takes a ResumeRequest: the account's pause ends now and
	// every member paused for it resumes. Answers a View.
	UpdateResume = "resume"
	// SignalLeave takes a LeaveSignal: the task no longer runs on the
	// account.
	SignalLeave = "leave"
	// SignalJoin takes a JoinRequest: the task becomes a member, as by
	// UpdateJoin, and is sent the account's pause at once (SignalNotice)
	// when the account is paused. Workers join by this signal and read
	// the account by QueryAccount: a server admits only a few updates in
	// flight per workflow, and thousands of tasks join one account.
	SignalJoin = "join"
	// QueryAccount answers a View.
	QueryAccount = "account"
	// MemoPause is the memo field where the account keeps its pause, a
	// View without its members: what a joining worker reads with a
	// describe, which the server answers alone. A query would wait for
	// the account's worker, behind the workflow tasks of every other
	// join, and thousands of tasks join one account.
	MemoPause = "pause"

	// SignalNotice is what the account sends a member task: a Notice.
	SignalNotice = "account-pause"
)

// WorkflowID is the one workflow id per account.
func WorkflowID(account string) string { return "karvi-account-" + account }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// QueueAccount is the agent account a worker gives, by default, the tasks
// of its task queue that name none: "default.<queue>", the queue's name
// made a valid account name (other characters become "_", a long name is
// cut) with a hash of the whole name when it had to change, so two queues
// never share it. One account per queue, not one for the namespace: the
// account's workflow runs on the queue of the worker that started it,
// whose workers serve its members.
func QueueAccount(queue string) string {
	const prefix = "default."
	name := prefix + queue
	if nameRE.MatchString(name) {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(queue))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	mapped := []rune{}
	for _, c := range queue {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			c = '_'
		}
		mapped = append(mapped, c)
	}
	if room := 64 - len(prefix) - len(suffix); len(mapped) > room {
		mapped = mapped[:room]
	}
	return prefix + string(mapped) + suffix
}

// ValidName refuses an account key that cannot name a workflow plainly.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("account %q must be 1-64 characters of A-Z a-z 0-9 . _ - (starting with a letter or digit)", name)
	}
	return nil
}

// StartOptions start an account's workflow on demand (update-with-start):
// the running one is used when there is one.
func StartOptions(account, taskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       WorkflowID(account),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// A new account is not paused; said from its start, so a join
		// that starts it reads that before its first workflow task.
		Memo:          map[string]any{MemoPause: View{Account: account}},
		StaticSummary: "Agent account " + account,
		StaticDetails: fmt.Sprintf("Whether agent account **%s** is paused for a usage limit, and which tasks run on it. "+
			"`starter account -account %s` shows it; `starter account resume -account %s` ends its pause.", account, account, account),
	}
}

// Input starts an account's workflow.
type Input struct {
	Account string `json:"account"`
	// ContinueAsNewAfter continues-as-new after this many requests (0: a
	// default; tests set it low).
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// Resume is the state handed over by continue-as-new.
	Resume json.RawMessage `json:"resume,omitempty"`
}

// JoinRequest makes a task workflow a member.
type JoinRequest struct {
	// Member is the task's workflow id.
	Member string `json:"member"`
}

// LimitRequest reports a usage limit met by a member.
type LimitRequest struct {
	Member string `json:"member"`
	// Task is the karvi task id, for people.
	Task string `json:"task,omitempty"`
	// Until is when the account may work again (the reset plus a margin).
	Until   time.Time `json:"until"`
	ResetAt time.Time `json:"resetAt,omitzero"`
	Phase   string    `json:"phase,omitempty"`
	Source  string    `json:"source,omitempty"`
	Text    string    `json:"text,omitempty"`
}

// ResumeRequest ends the account's pause now.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// LeaveSignal ends a task's membership.
type LeaveSignal struct {
	Member string `json:"member"`
}

// Notice tells a member of the account's pause (Until, what met the limit)
// or, with Resume, that the pause ended early.
type Notice struct {
	Account string    `json:"account"`
	Until   time.Time `json:"until,omitzero"`
	ResetAt time.Time `json:"resetAt,omitzero"`
	// By is the task that met the limit.
	By     string `json:"by,omitempty"`
	Phase  string `json:"phase,omitempty"`
	Source string `json:"source,omitempty"`
	Text   string `json:"text,omitempty"`
	Resume bool   `json:"resume,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// View is the account as QueryAccount and the updates answer it.
type View struct {
	Account string `json:"account"`
	// PausedUntil is when the account's pause ends; zero or past when it
	// is not paused.
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
	// Paused is PausedUntil still ahead, at the time of the answer.
	Paused  bool      `json:"paused"`
	ResetAt time.Time `json:"resetAt,omitzero"`
	By      string    `json:"by,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Source  string    `json:"source,omitempty"`
	Text    string    `json:"text,omitempty"`
	// Pauses counts the account's pauses.
	Pauses  int      `json:"pauses"`
	Members []string `json:"members"`
}
