// Package intentapi is the public face of schedule intents: the names of
// the fire workflow and of an intent's Temporal Schedule, the fire's input,
// how an intent becomes a schedule (spec, overlap policy, catch-up window),
// and Intents, the client operations the starter and the tests use
// (create, list, update, pause, unpause, trigger, cancel). The rules
// themselves are package intent's.
package intentapi
