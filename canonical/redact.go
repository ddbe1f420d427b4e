package canonical

import "karvi-edda-temporal/mapping/redact"

// Redact masks secrets in every string of ev, the payload included (values
// under sensitive keys and credential-like values, nested objects to depth
// 10), and returns the result; ev itself is not changed. Redact after
// Validate: a masked id no longer has an id's format, and the point of the
// order is that what gets stored or shown has been through both.
func Redact(ev Event) Event {
	ev.TS = redact.String(ev.TS)
	ev.RunID = redact.String(ev.RunID)
	ev.Provider = Provider(redact.String(string(ev.Provider)))
	ev.Mode = Mode(redact.String(string(ev.Mode)))
	ev.AgentID = redact.String(ev.AgentID)
	ev.ParentAgentID = redact.String(ev.ParentAgentID)
	ev.Role = Role(redact.String(string(ev.Role)))
	ev.State = State(redact.String(string(ev.State)))
	ev.Type = Type(redact.String(string(ev.Type)))
	ev.TaskID = redact.String(ev.TaskID)
	ev.IntentRef = redact.String(ev.IntentRef)
	ev.RawRef = redact.String(ev.RawRef)
	if len(ev.Payload) > 0 {
		ev.Payload = redact.JSON(ev.Payload)
	}
	return ev
}
