package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// Headers of every delivery.
const (
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256 of the body.
	HeaderSignature = "X-Karvi-Edda-Signature"
	// HeaderDelivery carries the event's delivery id, the same on retries.
	HeaderDelivery = "X-Karvi-Edda-Delivery"
	// HeaderEvent carries the event's kind.
	HeaderEvent = "X-Karvi-Edda-Event"
	// HeaderAttempt counts the attempts at this delivery, from 1. It is not
	// signed: use it for logs, never for decisions.
	HeaderAttempt = "X-Karvi-Edda-Attempt"
)

const sigPrefix = "sha256="

// Sign returns the signature header's value for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return sigPrefix + hex.EncodeToString(m.Sum(nil))
}

// Errors of VerifySignature.
var (
	ErrNoSignature  = errors.New("notify: no signature header")
	ErrBadSignature = errors.New("notify: signature does not match the body")
)

// VerifySignature checks a delivery's signature header against the raw body
// as received (before any JSON decoding) and the shared secret. It compares
// in constant time and returns nil only for a match:
//
//	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//	if err := notify.VerifySignature(secret, body, r.Header.Get(notify.HeaderSignature)); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//	// then skip the event if its X-Karvi-Edda-Delivery id was seen before
func VerifySignature(secret, body []byte, header string) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrNoSignature
	}
	hexSum, ok := strings.CutPrefix(header, sigPrefix)
	if !ok {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return ErrBadSignature
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrBadSignature
	}
	return nil
}
