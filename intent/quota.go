package intent

import "fmt"

// Quota bounds the intents that may be active at once, per owner and in
// all, so that no one fills the scheduler with work that starts itself.
type Quota struct {
	PerOwner int
	Global   int
}

// DefaultQuota: five active intents per owner, twenty in all.
var DefaultQuota = Quota{PerOwner: 5, Global: 20}

// Member is an intent as a quota counts it.
type Member struct {
	Name, Owner string
	Status      Status
}

// counts reports whether an intent holds a place: one that is active or
// that a person paused does; one in error or converged has stopped.
func (m Member) counts() bool {
	return m.Status == StatusActive || m.Status == StatusPaused
}

// Admit checks that intent name of owner may become active beside the
// others (name itself, if among them, is not counted twice).
func (q Quota) Admit(others []Member, name, owner string) error {
	global, mine := 0, 0
	for _, m := range others {
		if m.Name == name || !m.counts() {
			continue
		}
		global++
		if m.Owner == owner {
			mine++
		}
	}
	if mine >= q.PerOwner {
		return fmt.Errorf("quota: owner %s already has %d active intents (at most %d per owner); cancel one first", owner, mine, q.PerOwner)
	}
	if global >= q.Global {
		return fmt.Errorf("quota: %d intents are active (at most %d in all); cancel one first", global, q.Global)
	}
	return nil
}
