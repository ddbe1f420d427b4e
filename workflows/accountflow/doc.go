// Package accountflow is the agent account wing's workflow:
// AccountWorkflow holds one account's usage-limit pause, the tasks that
// joined it, and resumes them together when the limit resets or a person
// says so. Clients use accountapi; the activities are activities/accountact.
package accountflow
