// Package codec encrypts every Temporal payload with AES-256-GCM before it
// leaves the worker or the starter, so workflow inputs, activity results,
// signals and query answers are opaque in the server's history and database.
// It is off unless a key is configured: KeysFromEnv returns nil and
// DataConverter(nil) is the SDK default.
//
// Keys come from the environment of every process that reads or writes
// payloads (worker, starter, codec server):
//
//	KARVI_TEMPORAL_CODEC_KEY       current key: [ID:]KEY
//	KARVI_TEMPORAL_CODEC_OLD_KEYS  older keys for decoding: [ID:]KEY,[ID:]KEY...
//
// KEY is 32 bytes written as 64 hex digits or base64 (standard or URL
// alphabet, padded or not). Without an ID, the ID is derived from the key,
// so every process that has the same key agrees on it. Each encrypted payload
// records the ID of its key: rotating is setting a new current key and moving
// the old one to KARVI_TEMPORAL_CODEC_OLD_KEYS until the histories that used
// it are gone. With only old keys set, new payloads are written in the clear
// and old ones can still be read (a way to turn encryption off).
//
// Decode leaves payloads that are not encrypted as they are, so turning the
// codec on does not break histories written before. The Web UI and the
// temporal CLI reach the same codec through Handler (the remote codec
// protocol: POST .../encode and .../decode with Payloads as protobuf JSON).
package codec
