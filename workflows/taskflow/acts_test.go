package taskflow

import (
	"karvi-edda-temporal/activities/accountact"
	"karvi-edda-temporal/activities/slotact"
)

// The workflow calls the slot and account activities by name
// (slotapi.ActivityAcquireSlot, accountapi.ActivityAccountUpdate); the
// tests register and mock the activities themselves, so a name that
// drifts from the method's fails here.
var (
	slotActs    *slotact.Activities
	accountActs *accountact.Activities
)
