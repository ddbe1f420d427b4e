package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256 of the
	// timestamp, a dot and the body (Sign).
	HeaderSignature = "X-Karvi-Edda-Signature"
	// HeaderTimestamp carries the Unix time, in seconds, the attempt was
	// signed at. It is signed, so a captured delivery cannot be made to
	// look recent.
	HeaderTimestamp = "X-Karvi-Edda-Timestamp"
	// HeaderDelivery carries the event's delivery id, the same on retries.
	HeaderDelivery = "X-Karvi-Edda-Delivery"
	// HeaderEvent carries the event's kind.
	HeaderEvent = "X-Karvi-Edda-Event"
	// HeaderAttempt counts the attempts at this delivery, from 1. It is not
	// signed: use it for logs, never for decisions.
	HeaderAttempt = "X-Karvi-Edda-Attempt"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, either way, before VerifyRequest refuses it: wide enough for
// clocks a little apart and a slow network, narrow enough that a captured
// delivery is useless soon after. Every attempt is signed when it is
// sent, so a retry is as fresh as a first attempt.
const Tolerance = 5 * time.Minute

const sigPrefix = "sha256="

// Sign returns the signature header's value for body sent at timestamp
// (Unix seconds): "sha256=" and the hex HMAC-SHA256, under secret, of the
// timestamp in decimal, a dot, and the body's bytes.
func Sign(secret []byte, timestamp int64, body []byte) string {
	return sigPrefix + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of VerifySignature and VerifyRequest.
var (
	ErrNoSignature  = errors.New("notify: no signature header")
	ErrNoTimestamp  = errors.New("notify: no timestamp header, or not Unix seconds")
	ErrBadSignature = errors.New("notify: signature does not match the timestamp and body")
	ErrStale        = errors.New("notify: timestamp outside the tolerance: a late or replayed delivery")
)

// VerifyRequest checks a delivery as received: its signature and
// timestamp headers against the raw body (before any JSON decoding) and
// the shared secret, and its timestamp against now within Tolerance. It
// returns nil only for a match:
//
//	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//	if err := notify.VerifyRequest(secret, body, r.Header, time.Now()); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//	// then skip the event if its X-Karvi-Edda-Delivery id was seen before
func VerifyRequest(secret, body []byte, h http.Header, now time.Time) error {
	return VerifySignature(secret, body, h.Get(HeaderTimestamp), h.Get(HeaderSignature), now, Tolerance)
}

// VerifySignature checks a signature header's value and a timestamp
// header's value against the raw body and the shared secret, comparing in
// constant time, then the timestamp against now: one further than
// tolerance (Tolerance when zero or less) either way is refused with
// ErrStale.
func VerifySignature(secret, body []byte, timestamp, signature string, now time.Time, tolerance time.Duration) error {
	signature = strings.TrimSpace(signature)
	if signature == "" {
		return ErrNoSignature
	}
	timestamp = strings.TrimSpace(timestamp)
	at, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrNoTimestamp
	}
	hexSum, ok := strings.CutPrefix(signature, sigPrefix)
	if !ok {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return ErrBadSignature
	}
	if !hmac.Equal(got, mac(secret, timestamp, body)) {
		return ErrBadSignature
	}
	if tolerance <= 0 {
		tolerance = Tolerance
	}
	if d := now.Sub(time.Unix(at, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}
