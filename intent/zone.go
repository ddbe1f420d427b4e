package intent

// The zone database is built in, so that a zone name is accepted or refused
// the same way on every machine, whatever its system has installed.
import _ "time/tzdata"
