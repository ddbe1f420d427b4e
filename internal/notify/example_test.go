package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"karvi-edda-temporal/internal/notify"
)

// A receiver checks the signature over the timestamp and the raw body,
// refuses a delivery whose timestamp is not recent (a captured delivery
// sent again later), then acts on each delivery id once.
func ExampleVerifyRequest() {
	secret := []byte("shared-secret")
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read", http.StatusBadRequest)
			return
		}
		if err := notify.VerifyRequest(secret, body, r.Header, time.Now()); err != nil {
			fmt.Println("refused:", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(notify.HeaderDelivery)
		mu.Lock()
		dup := seen[id]
		seen[id] = true
		mu.Unlock()
		if !dup {
			fmt.Println("acting on", r.Header.Get(notify.HeaderEvent), id)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"id":"ev-1","version":1,"kind":"paused","time":"2026-03-10T14:00:00Z"}`
	now := time.Now().Unix()
	captured := now - 10*60 // a delivery taken off the wire ten minutes ago
	for _, d := range []struct {
		at  int64
		sig string
	}{
		{now, notify.Sign(secret, now, []byte(body))},
		{now, notify.Sign(secret, now, []byte(body))}, // a retry: the same id
		{captured, notify.Sign(secret, captured, []byte(body))},
		{now, notify.Sign(secret, captured, []byte(body))}, // its timestamp made fresh
		{now, "sha256=00"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
		req.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(d.at, 10))
		req.Header.Set(notify.HeaderSignature, d.sig)
		req.Header.Set(notify.HeaderDelivery, "ev-1")
		req.Header.Set(notify.HeaderEvent, "paused")
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// acting on paused ev-1
	// 204
	// 204
	// refused: notify: timestamp outside the tolerance: a late or replayed delivery
	// 401
	// refused: notify: signature does not match the timestamp and body
	// 401
	// refused: notify: signature does not match the timestamp and body
	// 401
}
