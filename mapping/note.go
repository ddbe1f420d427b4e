package mapping

// PatchTypeNote is the Type of a patch that only adds a note to the
// brief's log (BriefState.Note).
const PatchTypeNote = "note"

// Note adds one log entry the bridge writes itself (a budget warning, say)
// and says what changed, for the encoder. The entry goes through the same
// log bound as the conductor's.
func (s *BriefState) Note(at, action, detail string) Change {
	s.ensure()
	s.appendLogEntry(LogEntry{Time: at, Agent: SettleAgent, Action: action, Detail: detail})
	return Change{Pos: s.Applied, Type: PatchTypeNote, Fields: ChangedLog}
}
